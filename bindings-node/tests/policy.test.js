'use strict';
// Permissions in the Node binding: the policy and tool options reach the core (camelCase in, the core's
// rules out), bad input is a ConfigError naming it, and an approval handler (a plain function here; the
// scenario suite uses an async one) that throws or answers garbage is the core's denial, never a crash.

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const { Agent, OpenAIChat, tool, ConfigError } = require('..');

const model = new OpenAIChat('gpt-4.1', { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-test' });
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const weather = (extra = {}) =>
  tool({ name: 'get_weather', description: 'weather', parameters: schema, run: ({ city }) => `sunny in ${city}`, ...extra });

function configError(build, ...needles) {
  assert.throws(build, (e) => {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${e && e.stack}`);
    assert.equal(e.code, 'config');
    for (const n of needles) assert.ok(e.message.includes(n), `${JSON.stringify(e.message)} should name ${n}`);
    return true;
  });
}

function providerPath() {
  const exe = process.platform === 'win32' ? 'ambit-provider.exe' : 'ambit-provider';
  const cache = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');
  const candidates = [
    process.env.AMBIT_PROVIDER,
    process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, 'debug', exe),
    path.join(cache, 'target', 'debug', exe),
  ].filter(Boolean);
  const found = candidates.find((p) => fs.existsSync(p));
  assert.ok(found, `the loopback provider is not built (looked in ${candidates.join(', ')})`);
  return found;
}

/** Writes `scenario` to a file and starts the loopback provider on it: {baseUrl, stop}. */
function startProvider(scenario) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-policy-')), `${scenario.name}.json`);
  fs.writeFileSync(file, JSON.stringify(scenario));
  const child = spawn(providerPath(), ['--exit-on-eof', file], { stdio: ['pipe', 'pipe', 'inherit'] });
  const stop = () => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  };
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    readline.createInterface({ input: child.stdout }).once('line', (line) => resolve({ baseUrl: line.trim(), stop }));
  });
}

describe('policy configuration', () => {
  test('an unknown policy field is a ConfigError naming it', () => {
    configError(() => new Agent({ model, policy: { level: 'read', levle: 'read' } }), 'levle');
    configError(() => new Agent({ model, policy: { allowTool: ['x'] } }), "'allowTool'");
  });

  test('an unknown level is a ConfigError naming it', () => {
    configError(() => new Agent({ model, policy: { level: 'Read' } }), 'Read');
    configError(() => new Agent({ model, policy: { levelOverrides: { get_weather: 'admin' } } }), 'admin');
    configError(() => new Agent({ model, policy: { network: 'local' } }), 'local');
    configError(() => new Agent({ model, tools: [weather({ level: 'Read' })] }), 'Read', 'get_weather');
  });

  test('an unknown built-in is a ConfigError naming it', () => {
    configError(() => new Agent({ model, builtins: ['file_read', 'file_reed'] }), 'file_reed');
    configError(() => new Agent({ model, builtins: ['file_read'], tools: [tool({ name: 'file_read', parameters: schema, run: () => '' })] }), 'file_read');
  });

  test('the core refuses what it refuses: an empty allow-list, a missing directory', () => {
    configError(() => new Agent({ model, policy: { allowTools: [] } }), 'allow_tools');
    configError(() => new Agent({ model, policy: { workingDirectory: '/no/such/ambit/dir' } }), '/no/such/ambit/dir');
  });

  test('wrong JS types are TypeErrors', () => {
    assert.throws(() => new Agent({ model, policy: 'read' }), TypeError);
    assert.throws(() => new Agent({ model, policy: { approvals: 'yes' } }), TypeError);
    assert.throws(() => weather({ level: 1 }), TypeError);
    assert.throws(() => weather({ requiresApproval: 'yes' }), TypeError);
    // A bare string in a list option is a one-entry list (tests/hardening.test.js).
  });

  test('listTools shows effective levels, status and approval, with camelCase keys', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-wd-'));
    const agent = new Agent({
      model,
      builtins: ['file_read', 'file_write'],
      tools: [
        weather({ level: 'read', requiresApproval: true, allowBlank: ['city'] }),
        // A camelCase tool name: the facade converts the policy's own keys, never tool names.
        tool({ name: 'sendMail', parameters: schema, run: () => 'sent', level: 'unrestricted' }),
        tool({ name: 'undeclared', parameters: schema, run: () => '' }),
      ],
      policy: {
        level: 'read',
        approvals: () => ({ decision: 'approve' }),
        levelOverrides: { sendMail: 'read' },
        blockTools: ['undeclared'],
        workingDirectory: dir,
        confineReads: true,
        network: 'none',
      },
    });
    assert.deepEqual(agent.listTools(), [
      { name: 'get_weather', level: 'read', declaredLevel: 'read', status: 'offered', approval: true },
      { name: 'sendMail', level: 'read', declaredLevel: 'unrestricted', status: 'offered', approval: false },
      { name: 'undeclared', level: 'unrestricted', declaredLevel: 'unrestricted', status: 'blocked', approval: false },
      // Built-ins come after the host tools.
      { name: 'file_read', level: 'read', declaredLevel: 'read', status: 'offered', approval: false },
      { name: 'file_write', level: 'workspace', declaredLevel: 'workspace', status: 'offered', approval: true },
    ]);
    const t = weather({ level: 'read', requiresApproval: true, allowBlank: ['city'] });
    assert.equal(t.level, 'read');
    assert.equal(t.requiresApproval, true);
    assert.deepEqual(t.allowBlank, ['city']);
  });

  test('withPolicy makes a narrowed agent; bad input is a TypeError or a ConfigError naming it', () => {
    const agent = new Agent({ model, tools: [weather({ level: 'workspace' })], policy: { level: 'workspace' }, subagents: true });
    assert.throws(() => agent.withPolicy(), TypeError);
    assert.throws(() => agent.withPolicy('read'), TypeError);
    assert.throws(() => agent.withPolicy({ level: 'read', approvals: 'yes' }), TypeError);
    configError(() => agent.withPolicy({ level: 'Read' }), 'Read');
    configError(() => agent.withPolicy({ levle: 'read' }), 'levle');
    configError(() => agent.withPolicy({ allowTools: [] }), 'allow_tools');
    const narrowed = agent.withPolicy({ level: 'read' });
    assert.ok(narrowed instanceof Agent && narrowed !== agent);
    const status = (a) => Object.fromEntries(a.listTools().map((t) => [t.name, t.status]));
    assert.equal(status(narrowed).get_weather, 'above_level');
    assert.equal(status(narrowed).agent_followup, 'offered');
    assert.equal(status(agent).get_weather, 'offered', 'the agent itself is unchanged');
  });

  test('without a policy every tool is offered at unrestricted', () => {
    const agent = new Agent({ model, tools: [weather()] });
    assert.deepEqual(agent.listTools(), [
      { name: 'get_weather', level: 'unrestricted', declaredLevel: 'unrestricted', status: 'offered', approval: false },
    ]);
  });
});

describe('approval handler', () => {
  test('a plain-function handler: approve runs; a throw, garbage or nothing is a denial naming the problem', async () => {
    const call = (id) => ({ id, name: 'send_email', arguments: { to: `${id}@example.com` } });
    const scenario = {
      name: 'node_plain_handler',
      description: 'A plain JS approval handler: approve, garbage, a throw, no answer.',
      wire: 'openai_chat',
      agent: { model: 'gpt-4.1', api_key: 'sk-test' },
      tools: [],
      input: 'go',
      expect: {},
      exchanges: [
        { expect: {}, respond: { tool_calls: ['ok', 'maybe', 'throws', 'nothing'].map(call), usage: { prompt_tokens: 1, completion_tokens: 1 } } },
        { expect: {}, respond: { content: 'done', usage: { prompt_tokens: 1, completion_tokens: 1 } } },
      ],
    };
    const provider = await startProvider(scenario);
    const seen = [];
    try {
      const agent = new Agent({
        model: new OpenAIChat('gpt-4.1', { baseUrl: provider.baseUrl, apiKey: 'sk-test' }),
        tools: [
          tool({
            name: 'send_email',
            parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
            level: 'workspace',
            run: ({ to }) => `sent to ${to}`,
          }),
        ],
        policy: {
          level: 'read',
          // A plain (not async) function.
          approvals: (request) => {
            seen.push(request);
            switch (request.callId) {
              case 'ok':
                return { decision: 'approve' };
              case 'maybe':
                return { decision: 'maybe' };
              case 'throws':
                throw new Error('no one is at the desk');
              default:
                return undefined;
            }
          },
        },
      });
      const result = await agent.run('go');
      assert.equal(result.output, 'done');
      const byId = Object.fromEntries(result.toolCalls.map((c) => [c.id, c]));
      assert.deepEqual([byId.ok.result, byId.ok.isError], ['sent to ok@example.com', false]);
      for (const id of ['maybe', 'throws', 'nothing']) {
        assert.equal(byId[id].isError, true, id);
        assert.match(byId[id].result, /^Error: the call to tool 'send_email' was denied: the approval handler failed: /, id);
      }
      assert.match(byId.maybe.result, /maybe/);
      assert.match(byId.throws.result, /no one is at the desk/);
      assert.match(byId.nothing.result, /not a decision/);
      assert.equal(seen.length, 4);
      const ok = seen.find((r) => r.callId === 'ok');
      assert.deepEqual(ok, {
        callId: 'ok',
        tool: 'send_email',
        arguments: { to: 'ok@example.com' },
        toolLevel: 'workspace',
        sessionLevel: 'read',
        reason: 'above_level',
      });
    } finally {
      provider.stop();
    }
  });
});
