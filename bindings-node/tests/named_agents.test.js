'use strict';
// Profiles and named agents (issue #21): the README's example, and bad configuration refused naming the
// field. Their behaviour on the wire is in the shared scenario files (profile_spawn_followup.json,
// named_agent_delegate.json).

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { Agent, tool, TestModel, OpenAIChat, ConfigError } = require('..');

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  run: ({ city }) => `sunny in ${city}`,
});

test('the README example', async () => {
  const fast = new TestModel(['Paris: mild.']); // e.g. new OpenAIChat('gpt-4.1-nano', { temperature: 0.2 })
  const researcher = new Agent({
    model: new TestModel([{ toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] }, 'Sunny in Paris.']),
    instructions: 'You research weather.',
    tools: [getWeather],
  });
  const boss = new Agent({
    model: new TestModel([
      { toolCalls: [{ name: 'agent_spawn', arguments: { prompt: 'Summarise Paris weather.', profile: 'fast' } }] },
      { toolCalls: [{ name: 'agent_delegate', arguments: { agent: 'researcher', prompt: 'Weather in Paris?' } }] },
      'It is sunny in Paris.',
    ]),
    subagents: true,
    profiles: { fast },
    agents: { researcher: { agent: researcher, description: 'Looks up weather; one city per task.' } },
  });
  const result = await boss.run('Weather in Paris?');
  assert.equal(result.output, 'It is sunny in Paris.');
  const [spawn, delegate] = result.toolCalls;
  assert.ok(spawn.result.includes('Profile: fast') && spawn.result.endsWith('Paris: mild.'), spawn.result);
  assert.ok(delegate.result.startsWith('Agent: researcher') && delegate.result.endsWith('Sunny in Paris.'), delegate.result);
});

test('bad profiles and named agents are ConfigErrors naming the field', () => {
  const model = new OpenAIChat('m');
  const callee = new Agent({ model });
  assert.throws(() => new Agent({ model, profiles: { 'no spaces': new OpenAIChat('n') } }), (e) =>
    e instanceof ConfigError && e.message.includes("profiles: 'no spaces'"));
  assert.throws(() => new Agent({ model, profiles: { fast: 'gpt-4.1-nano' } }), (e) =>
    e instanceof ConfigError && e.message.includes('profiles.fast'));
  assert.throws(() => new Agent({ model, agents: { helper: { agent: callee, description: ' ' } } }), (e) =>
    e instanceof ConfigError && e.message.includes('named_agents.helper.description'));
  assert.throws(() => new Agent({ model, agents: { helper: callee } }), (e) =>
    e instanceof ConfigError && e.message.includes('agents.helper'));
  assert.throws(() => new Agent({ model, agents: { helper: { agent: callee, description: 'x', extra: 1 } } }), /extra/);
});

test('the named-agent tools exist only with named agents', () => {
  const model = new OpenAIChat('m');
  const names = (a) => a.listTools().map((t) => t.name);
  assert.ok(!names(new Agent({ model })).includes('agent_delegate'));
  const caller = new Agent({ model, agents: { helper: { agent: new Agent({ model }), description: 'Helps.' } } });
  assert.ok(names(caller).includes('agent_delegate') && names(caller).includes('agent_list_named'));
});
