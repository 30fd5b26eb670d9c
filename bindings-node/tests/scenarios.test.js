'use strict';
// Runs every scenario of tests/scenarios/ (the same files the Rust, Python and Swift suites run)
// against the loopback provider, plus the binding's own checks of bad input.
//
// The provider binary is `ambit-provider` from `cargo build -p ambit-test-provider`; it is looked up
// in $AMBIT_PROVIDER, then $CARGO_TARGET_DIR/debug, then ~/.cache/ambit/target/debug (scripts/env.sh).

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const {
  Agent,
  OpenAIChat,
  tool,
  AmbitError,
  ConfigError,
  ModelError,
  MaxTurnsError,
  CancelledError,
} = require('..');

const REPO = path.resolve(__dirname, '..', '..');
const SCENARIOS_DIR = path.join(REPO, 'tests', 'scenarios');
const EXE = process.platform === 'win32' ? 'ambit-provider.exe' : 'ambit-provider';

function providerPath() {
  const candidates = [];
  if (process.env.AMBIT_PROVIDER) candidates.push(process.env.AMBIT_PROVIDER);
  if (process.env.CARGO_TARGET_DIR) candidates.push(path.join(process.env.CARGO_TARGET_DIR, 'debug', EXE));
  const cache = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');
  candidates.push(path.join(cache, 'target', 'debug', EXE));
  candidates.push(path.join(REPO, 'target', 'debug', EXE));
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) {
    throw new Error(
      `the loopback provider binary is missing (looked in: ${candidates.join(', ')}); ` +
        'build it with `cargo build -p ambit-test-provider` or run scripts/test-node.sh',
    );
  }
  return found;
}

/** Starts the provider on a scenario file; resolves to {baseUrl, stop, stderr()}. */
function startProvider(file) {
  const child = spawn(providerPath(), ['--exit-on-eof', file], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const stop = () => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  };
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`the provider printed no base URL within 10s; stderr: ${stderr}`));
    }, 10_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the provider exited (${code}) before printing its base URL; stderr: ${stderr}`));
    });
    lines.once('line', (line) => {
      clearTimeout(timer);
      lines.close();
      resolve({ baseUrl: line.trim(), stop, stderr: () => stderr });
    });
  });
}

/** Replaces every `{arg}` with that argument's value. */
function substitute(text, args) {
  return text.replace(/\{([^{}]+)\}/g, (whole, key) =>
    Object.prototype.hasOwnProperty.call(args, key) ? String(args[key]) : whole,
  );
}

function scenarioTool(spec) {
  const { behavior } = spec;
  let run;
  if (Object.prototype.hasOwnProperty.call(behavior, 'returns')) {
    run = async (args) => substitute(behavior.returns, args);
  } else if (Object.prototype.hasOwnProperty.call(behavior, 'raises')) {
    run = async (args) => {
      throw new Error(substitute(behavior.raises, args));
    };
  } else {
    throw new Error(`unknown tool behavior in scenario: ${JSON.stringify(behavior)}`);
  }
  return tool({ name: spec.name, description: spec.description, parameters: spec.parameters, run });
}

const CAMEL = {
  requests: 'requests',
  input_tokens: 'inputTokens',
  output_tokens: 'outputTokens',
  cache_read_tokens: 'cacheReadTokens',
  cache_write_tokens: 'cacheWriteTokens',
};

const CLASS_BY_CODE = {
  config: ConfigError,
  model_http: ModelError,
  model_transport: ModelError,
  model_response: ModelError,
  max_turns: MaxTurnsError,
  cancelled: CancelledError,
};

function checkResult(result, expect) {
  if ('output' in expect) assert.equal(result.output, expect.output, 'output');
  if ('tool_calls' in expect) {
    assert.equal(result.toolCalls.length, expect.tool_calls.length, 'number of tool calls');
    expect.tool_calls.forEach((want, i) => {
      const got = result.toolCalls[i];
      if ('name' in want) assert.equal(got.name, want.name, `toolCalls[${i}].name`);
      if ('arguments' in want) assert.deepEqual(got.arguments, want.arguments, `toolCalls[${i}].arguments`);
      if ('result' in want) assert.equal(got.result, want.result, `toolCalls[${i}].result`);
      if ('is_error' in want) assert.equal(got.isError, want.is_error, `toolCalls[${i}].isError`);
      assert.equal(typeof got.id, 'string', `toolCalls[${i}].id`);
    });
  }
  if ('usage' in expect) {
    for (const [key, value] of Object.entries(expect.usage)) {
      assert.ok(key in CAMEL, `unknown usage field in scenario: ${key}`);
      assert.equal(result.usage[CAMEL[key]], value, `usage.${CAMEL[key]}`);
    }
  }
}

async function runScenario(file) {
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.equal(scenario.wire, 'openai_chat', `unsupported wire: ${scenario.wire}`);
  const provider = await startProvider(file);
  try {
    const cfg = scenario.agent;
    const agent = new Agent({
      model: new OpenAIChat(cfg.model, { baseUrl: provider.baseUrl, apiKey: cfg.api_key }),
      instructions: cfg.instructions,
      tools: scenario.tools.map(scenarioTool),
      maxTurns: cfg.max_turns,
    });
    const { expect } = scenario;
    if (expect.error) {
      await assert.rejects(agent.run(scenario.input), (e) => {
        assert.ok(e instanceof AmbitError, `expected an AmbitError, got ${e && e.stack}`);
        assert.equal(e.code, expect.error.code, `error code (message: ${e.message})`);
        const cls = CLASS_BY_CODE[expect.error.code];
        if (cls) assert.ok(e instanceof cls, `expected a ${cls.name}, got ${e.name}`);
        if (expect.error.message_contains) {
          assert.ok(
            e.message.includes(expect.error.message_contains),
            `error message ${JSON.stringify(e.message)} should contain ${JSON.stringify(expect.error.message_contains)}`,
          );
        }
        if (e.code === 'model_http') assert.equal(typeof e.status, 'number', 'ModelError.status');
        return true;
      });
    } else {
      let result;
      try {
        result = await agent.run(scenario.input);
      } catch (e) {
        throw new Error(`the run failed: ${e.message} (code ${e.code}); provider stderr: ${provider.stderr()}`);
      }
      checkResult(result, expect);
    }
  } finally {
    provider.stop();
  }
}

describe('scenarios', () => {
  const files = fs
    .readdirSync(SCENARIOS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort();

  test('the scenario directory has scenarios', () => {
    assert.ok(files.length > 0, `no scenario files in ${SCENARIOS_DIR}`);
  });

  test('the provider binary exists', () => {
    providerPath();
  });

  for (const f of files) {
    test(f.replace(/\.json$/, ''), () => runScenario(path.join(SCENARIOS_DIR, f)));
  }
});

describe('binding', () => {
  const model = new OpenAIChat('gpt-4.1', { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-test' });
  const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

  test('duplicate tool names are a ConfigError', () => {
    const a = tool({ name: 'get_weather', description: 'a', parameters: schema, run: () => 'a' });
    const b = tool({ name: 'get_weather', description: 'b', parameters: schema, run: () => 'b' });
    assert.throws(
      () => new Agent({ model, tools: [a, b] }),
      (e) => e instanceof ConfigError && e instanceof AmbitError && e.code === 'config' && /get_weather/.test(e.message),
    );
  });

  test('parameters that are not an object schema are a config error', () => {
    for (const parameters of ['a string', [1, 2], { type: 'string' }, undefined, null]) {
      const t = tool({ name: 'bad_schema', description: 'x', parameters, run: () => 'x' });
      assert.throws(
        () => new Agent({ model, tools: [t] }),
        (e) => e instanceof ConfigError && e.code === 'config' && /bad_schema/.test(e.message) && /parameters/.test(e.message),
        `parameters ${JSON.stringify(parameters)}`,
      );
    }
  });

  test('a missing model is a config error', () => {
    assert.throws(
      () => new Agent({ instructions: 'x' }),
      (e) => e instanceof ConfigError && e.code === 'config' && /model/.test(e.message),
    );
  });

  test('maxTurns 0 or not an integer is a config error', () => {
    for (const maxTurns of [0, -1, 1.5, 'ten']) {
      assert.throws(
        () => new Agent({ model, maxTurns }),
        (e) => e instanceof ConfigError && e.code === 'config' && /max_?turns/i.test(e.message),
        `maxTurns ${JSON.stringify(maxTurns)}`,
      );
    }
  });

  test('a tool without a function is a TypeError naming the tool', () => {
    assert.throws(
      () => tool({ name: 'no_run', description: 'x', parameters: schema }),
      (e) => e instanceof TypeError && /no_run/.test(e.message) && /run/.test(e.message),
    );
    assert.throws(() => new Agent({ model, tools: [{ name: 'raw', run: () => 1 }] }), TypeError);
    assert.throws(() => new Agent({ model: 'gpt-4.1' }), TypeError);
    assert.throws(() => new Agent(), TypeError);
  });

  test('a run with a non-string input is a TypeError', async () => {
    const agent = new Agent({ model });
    await assert.rejects(agent.run(42), TypeError);
  });

  test('sync and async tools both work; non-string results go as JSON; non-Error throws keep their text', async () => {
    // A scenario of the binding's own, in the shared file format (the provider reads the whole file).
    const schemaSpec = (name) => ({ name, description: name, parameters: schema, behavior: { returns: '' } });
    const scenario = {
      name: 'node_sync_async',
      description: 'Sync and async JS tools in one turn.',
      wire: 'openai_chat',
      agent: { model: 'gpt-4.1', api_key: 'sk-test' },
      tools: [schemaSpec('sync_tool'), schemaSpec('async_tool'), schemaSpec('throws_string')],
      input: 'go',
      expect: { output: 'done' },
      exchanges: [
        {
          expect: { tool_names: ['sync_tool', 'async_tool', 'throws_string'] },
          respond: {
            tool_calls: [
              { id: 's1', name: 'sync_tool', arguments: { city: 'Oslo' } },
              { id: 'a1', name: 'async_tool', arguments: { city: 'Rome' } },
              { id: 't1', name: 'throws_string', arguments: {} },
            ],
            usage: { prompt_tokens: 10, completion_tokens: 3 },
          },
        },
        {
          expect: {
            messages_tail: [
              { role: 'tool', tool_call_id: 's1', content: '{"city":"Oslo","temp":21}' },
              { role: 'tool', tool_call_id: 'a1', content: 'async in Rome' },
              { role: 'tool', tool_call_id: 't1', content: "Error: tool 'throws_string' failed: plain string" },
            ],
          },
          respond: { content: 'done', usage: { prompt_tokens: 20, completion_tokens: 1 } },
        },
      ],
    };
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-')), 'sync_async.json');
    fs.writeFileSync(file, JSON.stringify(scenario));
    const provider = await startProvider(file);
    try {
      const agent = new Agent({
        model: new OpenAIChat('gpt-4.1', { baseUrl: provider.baseUrl, apiKey: 'sk-test' }),
        tools: [
          tool({ name: 'sync_tool', description: 'sync', parameters: schema, run: ({ city }) => ({ city, temp: 21 }) }),
          tool({
            name: 'async_tool',
            description: 'async',
            parameters: schema,
            run: async ({ city }) => {
              await new Promise((r) => setTimeout(r, 20));
              return `async in ${city}`;
            },
          }),
          tool({
            name: 'throws_string',
            description: 'throws',
            parameters: { type: 'object', properties: {} },
            run: () => {
              throw 'plain string'; // eslint-disable-line no-throw-literal
            },
          }),
        ],
      });
      let result;
      try {
        result = await agent.run('go');
      } catch (e) {
        throw new Error(`the run failed: ${e.message}; provider stderr: ${provider.stderr()}`);
      }
      assert.equal(result.output, 'done');
      assert.equal(result.turns, 2);
      assert.deepEqual(
        result.toolCalls.map((c) => [c.id, c.name, c.result, c.isError]),
        [
          ['s1', 'sync_tool', '{"city":"Oslo","temp":21}', false],
          ['a1', 'async_tool', 'async in Rome', false],
          ['t1', 'throws_string', "Error: tool 'throws_string' failed: plain string", true],
        ],
      );
      assert.deepEqual(result.usage, {
        requests: 2,
        inputTokens: 30,
        outputTokens: 4,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      });
      assert.equal(result.messages[0].role, 'user');
    } finally {
      provider.stop();
    }
  });

  test('an unreachable provider is a ModelError with code model_transport', async () => {
    // Port 9 (discard) on loopback: nothing listens there, the connection is refused.
    const agent = new Agent({ model: new OpenAIChat('gpt-4.1', { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k' }) });
    await assert.rejects(agent.run('hi'), (e) => e instanceof ModelError && e.code === 'model_transport');
  });
});
