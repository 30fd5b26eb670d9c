'use strict';
// The test model users get (TestModel, FunctionModel): the README's example test, its refusals, and that
// its replies go through the real wire decoding.

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { Agent, tool, TestModel, FunctionModel, ModelError, ConfigError } = require('..');

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  run: ({ city }) => `sunny in ${city}`,
});

test('the README example', async () => {
  const model = new TestModel([{ toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] }, 'Sunny in Paris.']);
  const agent = new Agent({ model, tools: [getWeather] });
  const result = await agent.run('Weather in Paris?');
  assert.equal(result.output, 'Sunny in Paris.');
  assert.deepEqual(result.toolCalls.map((c) => [c.name, c.result]), [['get_weather', 'sunny in Paris']]);
});

for (const wire of ['openai_chat', 'anthropic', 'openai_responses']) {
  test(`a function model sees the conversation and the wire body (${wire})`, async () => {
    const seen = [];
    const model = new FunctionModel(
      (request) => {
        seen.push(request);
        if (request.index === 1) return { toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] };
        return `done after ${request.messages.length} messages`;
      },
      { wire },
    );
    const agent = new Agent({ model, tools: [getWeather], instructions: 'Be brief.' });
    const result = await agent.run('Weather in Oslo?');
    assert.equal(result.output, 'done after 3 messages');
    assert.deepEqual(seen[0].messages, [{ role: 'user', content: 'Weather in Oslo?' }]);
    assert.equal(seen[1].messages.at(-1).content, 'sunny in Oslo');
    const body = seen[1].body;
    if (wire === 'openai_responses') assert.equal(body.instructions, 'Be brief.');
    else if (wire === 'anthropic') assert.ok(JSON.stringify(body.system).includes('Be brief.'));
    else assert.deepEqual(body.messages[0], { role: 'system', content: 'Be brief.' });
  });

  test(`a streamed reply arrives as the wire streams it (${wire})`, async () => {
    const deltas = async (stream) => {
      const agent = new Agent({ model: new TestModel(['It is sunny in Paris today.'], { wire, stream }) });
      const out = [];
      for await (const e of agent.stream('Weather?')) if (e.type === 'text_delta') out.push(e.text);
      return out;
    };
    const streamed = await deltas(true);
    assert.equal(streamed.join(''), 'It is sunny in Paris today.');
    // Through the wire's server-sent events the text comes in pieces; the negative control: unstreamed,
    // the same reply is one piece.
    assert.ok(streamed.length > 1, JSON.stringify(streamed));
    assert.deepEqual(await deltas(false), ['It is sunny in Paris today.']);
  });
}

test('an async function model', async () => {
  const agent = new Agent({ model: new FunctionModel(async (r) => `you said ${r.messages.at(-1).content}`) });
  assert.equal((await agent.run('hello')).output, 'you said hello');
});

test('a request past the script fails the run naming it', async () => {
  const agent = new Agent({
    model: new TestModel([{ toolCalls: [{ name: 'get_weather', arguments: { city: 'Rome' } }] }]),
    tools: [getWeather],
  });
  await assert.rejects(agent.run('Weather in Rome?'), (e) => {
    assert.ok(e instanceof ModelError, e.stack);
    assert.equal(e.code, 'model_response');
    assert.match(e.message, /no reply left for request 2: it was scripted with 1/);
    return true;
  });
});

test('a function that throws fails the run naming it', async () => {
  const agent = new Agent({
    model: new FunctionModel(() => {
      throw new Error('no answer for you');
    }),
  });
  await assert.rejects(agent.run('hi'), (e) => e instanceof ModelError && /function failed: no answer for you/.test(e.message));
  const wrong = new Agent({ model: new FunctionModel(() => 42) });
  await assert.rejects(wrong.run('hi'), (e) => e instanceof ModelError && /a reply must be a string or an object/.test(e.message));
});

test('bad replies and options are refused', () => {
  assert.throws(() => new Agent({ model: new TestModel(['ok', { toolCalls: [{ name: '' }] }]) }), (e) =>
    e instanceof ConfigError && /replies\[1\].*empty name/.test(e.message));
  assert.throws(() => new Agent({ model: new TestModel([{ toolCalls: [{ name: 't', arguments: [1] }] }]) }), (e) =>
    e instanceof ConfigError && /not a JSON object/.test(e.message));
  assert.throws(() => new TestModel([{ text: 'x' }]), (e) => e instanceof ConfigError && /unknown reply field 'text'/.test(e.message));
  assert.throws(() => new TestModel(['ok'], { wire: 'grpc' }), (e) => e instanceof ConfigError && /wire must be one of/.test(e.message));
  assert.throws(() => new TestModel('ok'), TypeError);
  assert.throws(() => new FunctionModel('not a function'), TypeError);
});
