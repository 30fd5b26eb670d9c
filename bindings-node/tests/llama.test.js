'use strict';
// Against llama.cpp's real OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1 with the suite's
// tiny model: tests/llama/serve.py --tiny, the helper every language starts, one server for this file
// (stopped when its standard input closes). The Python interpreter is $AMBIT_PY, else the suite's
// virtualenv $AMBIT_CACHE/venv (scripts/llama-env.sh makes it).

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const { Agent, OpenAIChat, tool } = require('..');

const REPO = path.join(__dirname, '..', '..');

function python() {
  if (process.env.AMBIT_PY) return process.env.AMBIT_PY;
  const cache = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');
  return path.join(cache, 'venv', 'bin', 'python');
}

describe('the real llama.cpp server', () => {
  let server;
  let baseUrl;

  before(async () => {
    server = spawn(python(), [path.join(REPO, 'tests', 'llama', 'serve.py'), '--tiny'],
      { stdio: ['pipe', 'pipe', 'ignore'] });
    const lines = readline.createInterface({ input: server.stdout });
    baseUrl = await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.once('exit', (code) => reject(new Error(`llama.cpp's server exited (${code}); is xllamacpp in ${python()}?`)));
      lines.once('line', resolve);
    });
    assert.match(baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  after(() => {
    server.stdin.end();
  });

  function agentFor(calls, options = {}) {
    const getWeather = tool({
      name: 'get_weather', description: 'Current weather for a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      run: async ({ city }) => { calls.push(city); return `sunny in ${city}`; },
    });
    return new Agent({ model: new OpenAIChat('tiny', { baseUrl, apiKey: 'none', ...options }), tools: [getWeather],
                       maxTurns: 4 });
  }

  async function collect(agent, input) {
    const events = [];
    for await (const e of agent.stream(input)) events.push(e);
    return events;
  }

  for (const stream of [false, true]) {
    test(`a tool call of the real server reaches a JS tool (stream ${stream})`, async () => {
      const calls = [];
      const result = await agentFor(calls, { stream }).run('Weather in Paris?');
      // The server's grammar wrote the call ({"city": "P"}); the model's answer to the result is "OK".
      assert.deepEqual(calls, ['P']);
      assert.equal(result.output, 'OK');
      assert.equal(result.turns, 2);
      assert.equal(result.usage.requests, 2);
    });

    test(`constrained decoding makes the real server write a valid call as text (stream ${stream})`, async () => {
      const calls = [];
      const events = await collect(agentFor(calls, { stream, textToolCalls: 'constrained' }),
        'Weather in Paris, as json?');
      const result = events.at(-1).result;
      assert.deepEqual(calls, ['P']);
      assert.deepEqual(events.filter((e) => e.type === 'tool_call_requested').map((e) => [e.name, e.fromText]),
        [['get_weather', true]]);
      assert.equal(result.output, 'P');
      assert.equal(result.stopReason, 'end');
      assert.equal(events.filter((e) => e.type === 'text_delta').map((e) => e.text).join(''), 'P');
    });
  }

  test('without the constraint the same model writes no call (negative control)', async () => {
    const calls = [];
    const result = await agentFor(calls, { textToolCalls: 'auto' }).run('Weather in Paris, as json?');
    assert.deepEqual(calls, []);
    assert.deepEqual(result.toolCalls, []);
    assert.ok(result.output.startsWith('{'), result.output);
    assert.equal(result.stopReason, 'length');
  });
});
