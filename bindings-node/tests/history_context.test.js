'use strict';
// Message history and run context from Node (issue 21, items 4 and 5): messages round-trip through
// `result.messages` and back into `run`; a run's context reaches its own tools and no other run's. The
// shared scenario files (history_*, run_context) run in scenarios.test.js.

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { Agent, tool, TestModel, FunctionModel, InvalidMessageError, ConfigError, Sessions } = require('..');

/** Calls `whoami` until the conversation holds its result, then answers with it. */
function whoamiModel() {
  return new FunctionModel((request) => {
    const last = request.messages[request.messages.length - 1];
    if (last.role === 'tool') return `you are ${last.content}`;
    return { toolCalls: [{ name: 'whoami', arguments: {} }] };
  });
}

/** A gate two callers pass together: each `arrive()` resolves once both have arrived. */
function pairGate() {
  let arrived = 0;
  let release;
  const bothIn = new Promise((r) => (release = r));
  return async () => {
    arrived += 1;
    if (arrived === 2) release();
    await bothIn;
  };
}

/** Two runs at once, as users ada and bob; each tool call waits until both are in flight. */
async function twoRuns(read) {
  const arrive = pairGate();
  const whoami = tool({
    name: 'whoami',
    description: 'The current user.',
    parameters: { type: 'object', properties: {} },
    run: async (_args, ctx) => {
      const value = read.before(ctx);
      await arrive();
      return read.after(ctx, value);
    },
  });
  const agent = new Agent({ model: whoamiModel(), tools: [whoami] });
  const [a, b] = await Promise.all([
    agent.run('who am I?', { context: { name: 'ada' } }),
    agent.run('who am I?', { context: { name: 'bob' } }),
  ]);
  return [a.output, b.output];
}

test('two concurrent runs each see their own context', async () => {
  const own = { before: () => undefined, after: (ctx) => ctx.context.name };
  assert.deepEqual(await twoRuns(own), ['you are ada', 'you are bob']);
});

test('negative control: the check catches a context shared between runs', async () => {
  const shared = {};
  const leaky = {
    before: (ctx) => {
      shared.name = ctx.context.name;
    },
    after: () => shared.name,
  };
  const [a, b] = await twoRuns(leaky);
  assert.equal(a, b);
  assert.notDeepEqual([a, b], ['you are ada', 'you are bob']);
});

test('a run without a context gives its tool a ConfigError', async () => {
  const whoami = tool({
    name: 'whoami',
    description: 'The current user.',
    parameters: { type: 'object', properties: {} },
    run: (_args, ctx) => ctx.context.name,
  });
  const agent = new Agent({ model: whoamiModel(), tools: [whoami] });
  const result = await agent.run('who am I?');
  assert.ok(result.toolCalls[0].isError && result.toolCalls[0].result.includes('the run has no context'));
  assert.equal((await agent.run('who am I?', { context: { name: 'cy' } })).output, 'you are cy');
  assert.ok(ConfigError);
});

test('a history round-trips through result.messages', async () => {
  const seen = [];
  const model = new FunctionModel((request) => {
    seen.push(request);
    if (request.index === 1) return { toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] };
    return `answer ${request.index}`;
  });
  const getWeather = tool({
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    run: ({ city }) => `sunny in ${city}`,
  });
  const agent = new Agent({ model, tools: [getWeather] });
  const first = await agent.run('Weather in Oslo?');
  assert.deepEqual(first.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
  assert.equal(first.messages[2].callId, first.messages[1].toolCalls[0].id);
  const second = await agent.run([...first.messages, { role: 'user', content: 'And tomorrow?' }]);
  assert.equal(second.output, 'answer 3');
  assert.deepEqual(seen[2].messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'user']);
  assert.deepEqual(second.messages.slice(0, 4), first.messages);
});

test('a bad history names the message and field', async () => {
  const agent = new Agent({ model: new TestModel(['never']), tools: [] });
  const orphan = [{ role: 'user', content: 'hi' }, { role: 'tool', callId: 'nope', name: 't', content: 'r', isError: false }];
  await assert.rejects(agent.run(orphan), (e) => e instanceof InvalidMessageError && e.index === 1 && e.field === 'call_id');
  await assert.rejects(agent.run([{ role: 'user', content: 5 }]), (e) => e instanceof InvalidMessageError && e.field === 'content');
  await assert.rejects(agent.run(42), TypeError);
  // Streamed, the refusal is the stream's error.
  await assert.rejects(
    (async () => {
      for await (const _ of agent.stream(orphan));
    })(),
    InvalidMessageError,
  );
});

test('a session refuses a message list and stores nothing', async (t) => {
  const dir = require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'ambit-hist-'));
  t.after(() => require('node:fs').rmSync(dir, { recursive: true, force: true }));
  const sessions = await Sessions.open(`sqlite://${dir}/s.db`);
  const sid = await sessions.create();
  const agent = new Agent({ model: new TestModel(['never']), tools: [] });
  await assert.rejects(sessions.run(agent, sid, [{ role: 'user', content: 'hi' }]), (e) =>
    e instanceof ConfigError && e.message.includes('a session keeps its own history'));
  assert.deepEqual(await sessions.entries(sid), []);
});

test('session runs each see their own context; none is stored; resume refuses unknown options', async (t) => {
  const fs = require('node:fs');
  const dir = fs.mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'ambit-sctx-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const arrive = pairGate();
  const whoami = tool({
    name: 'whoami',
    description: 'The current user.',
    parameters: { type: 'object', properties: {} },
    run: async (_args, ctx) => {
      const name = ctx.context.name;
      if (name === 'ada' || name === 'bob') await arrive();
      return name;
    },
  });
  const agent = new Agent({ model: whoamiModel(), tools: [whoami] });
  const sessions = await Sessions.open(`sqlite://${dir}/s.db`);
  const [s1, s2] = [await sessions.create(), await sessions.create()];
  const [a, b] = await Promise.all([
    sessions.run(agent, s1, 'who am I?', { context: { name: 'ada', secret: 'ctx-only-value' } }),
    sessions.run(agent, s2, 'who am I?', { context: { name: 'bob' } }),
  ]);
  assert.deepEqual([a.output, b.output], ['you are ada', 'you are bob']);
  // Control: the same session run without a context gives the tool the typed error.
  const bare = await sessions.run(agent, s1, 'who am I?');
  assert.ok(bare.toolCalls[0].isError && bare.toolCalls[0].result.includes('the run has no context'));
  assert.ok(!JSON.stringify(await sessions.entries(s1)).includes('ctx-only-value'));
  await assert.rejects(sessions.run(agent, s1, 'hi', { contxt: {} }), (e) => e instanceof ConfigError && /unknown option 'contxt'/.test(e.message));
  await assert.rejects(sessions.resume(agent, s1, { decision: 'approve' }, { contxt: {} }), ConfigError);
});

/** Collects garbage until `done()` holds (FinalizationRegistry callbacks run after a collection, on a
 * later task), at most 50 rounds. */
async function collectUntil(done) {
  const v8 = require('node:v8');
  const vm = require('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  for (let i = 0; i < 50 && !done(); i += 1) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return done();
}

test('attack: a stream iterator dropped unfinished, returned or aborted gives back its context', async () => {
  const core = require('..');
  const held = core._heldContexts;
  const agent = new Agent({
    model: new TestModel(['hello', 'hello', 'hello']),
  });
  const before = held();
  // Dropped after its first event, never returned: the leak the GC now closes.
  await (async () => {
    const events = agent.stream('hi', { context: { name: 'ada' } });
    assert.equal((await events.next()).value.type, 'run_started');
    assert.equal(held(), before + 1, 'the running stream holds its context');
  })();
  assert.ok(await collectUntil(() => held() === before), `held ${held()} contexts, wanted ${before}`);
  // Returned early (a loop left with break): given back at once.
  for await (const event of agent.stream('hi', { context: { name: 'bob' } })) {
    assert.equal(event.type, 'run_started');
    break;
  }
  assert.equal(held(), before);
  // Aborted while the consumer is not pulling: given back at once.
  const controller = new AbortController();
  const events = agent.stream('hi', { context: { name: 'cy' }, signal: controller.signal });
  await events.next();
  assert.equal(held(), before + 1);
  controller.abort();
  assert.equal(held(), before);
  // Control: a stream run to its end sees its context until then, and gives it back.
  const seen = [];
  const whoami = new Agent({
    model: whoamiModel(),
    tools: [tool({ name: 'whoami', description: 'Who is asking.', parameters: { type: 'object', properties: {} },
      run: (_args, ctx) => ctx.context.name })],
  });
  for await (const event of whoami.stream('who am I?', { context: { name: 'dee' } })) seen.push(event.type);
  assert.equal(seen.at(-1), 'run_finished');
  assert.equal(held(), before);
});
