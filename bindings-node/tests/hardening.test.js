'use strict';
// Issue 12 at the Node boundary: a panic in the core is InternalError (code "internal") from a
// synchronous export and from a run's task (item 7); the process exits cleanly with a tool in flight
// (item 8); list options read by the argument rule, unknown option keys refused by name, a blank tool
// name refused (item 10).

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn, spawnSync } = require('node:child_process');

const ambit = require('..');
const native = require('../native.js');
const { Agent, OpenAIChat, FunctionModel, tool, ConfigError, InternalError, AmbitError } = ambit;

const offline = new OpenAIChat('m', { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', maxRetries: 0 });

function providerPath() {
  const exe = 'ambit-provider';
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

/** The loopback provider on a scenario whose model calls `toolName` once, then answers "done". */
function startProvider(toolName) {
  return startScenario({ name: `hardening_${toolName}`, exchanges: [
    { respond: { tool_calls: [{ id: 'a', name: toolName, arguments: {} }] } },
    { respond: { content: 'done' } },
  ] });
}

/** The loopback provider on a scenario given as an object. */
function startScenario(scenario) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-hardening-')), 'scenario.json');
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

function isInternal(e) {
  assert.ok(e instanceof InternalError, `expected InternalError, got ${e && e.stack}`);
  assert.ok(e instanceof AmbitError);
  assert.equal(e.code, 'internal');
  assert.match(e.message, /a panic forced by a test/);
  return true;
}

function configError(build, ...needles) {
  assert.throws(build, (e) => {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${e && e.stack}`);
    assert.equal(e.code, 'config');
    for (const n of needles) assert.ok(e.message.includes(n), `${JSON.stringify(e.message)} should name ${n}`);
    return true;
  });
}

describe('panics (item 7)', () => {
  test('a panic in a synchronous export is InternalError', () => {
    assert.throws(() => native._testingForcePanic(), isInternal);
  });

  test('a panic inside a run is InternalError', async () => {
    const p = await startProvider('ambit_testing_panic');
    try {
      const model = new OpenAIChat('m', { baseUrl: p.baseUrl, apiKey: 'k', maxRetries: 0 });
      const agent = native.createAgent({ model: model.toNative() }, [], native._testingPanickingTools());
      const envelope = JSON.parse(await agent.run('go'));
      assert.equal(envelope.ok, false);
      isInternal(ambit._toError(envelope.error));
    } finally {
      p.stop();
    }
  });

  test('a panic inside a streamed run is InternalError', async () => {
    const p = await startProvider('ambit_testing_panic');
    try {
      const model = new OpenAIChat('m', { baseUrl: p.baseUrl, apiKey: 'k', maxRetries: 0 });
      const agent = native.createAgent({ model: model.toNative() }, [], native._testingPanickingTools());
      const feed = agent.stream('go');
      // Each `next` hands over a list of envelopes (the events waiting); an empty list ends the stream.
      let failed;
      for (let batch = JSON.parse(await feed.next()); batch.length > 0 && !failed; batch = JSON.parse(await feed.next())) {
        failed = batch.find((envelope) => !envelope.ok);
      }
      assert.ok(failed, 'the stream ends with the error, not as a finished run');
      isInternal(ambit._toError(failed.error));
    } finally {
      p.stop();
    }
  });

  // The tests above panic in a tool, which the core catches itself. These reach the binding's own catch
  // (`catch_unwind` around the polled run in `NativeAgent.run`, and around the batch in
  // `NativeRunStream.next`): a panic there, outside the core, by the test build's `_testingPanicNext`
  // (cargo feature test-hooks; the release addon has no such switch). Negative control: with the catch
  // in `NativeAgent.run` removed, napi-rs's own catch rejected the run with a plain Error ("Panic in
  // async function"), not InternalError, and the first test failed.
  test('a panic in the binding around a run is InternalError, and the process goes on', async () => {
    const model = new FunctionModel(() => 'fine');
    const agent = native.createAgent({ model: model.toNative() }, []);
    native._testingPanicNext();
    const envelope = JSON.parse(await agent.run('go'));
    assert.equal(envelope.ok, false);
    const e = ambit._toError(envelope.error);
    assert.ok(e instanceof InternalError, e.stack);
    assert.match(e.message, /a panic forced by a test/);
    // The process lives, and so does the agent: the next run answers.
    const again = JSON.parse(await agent.run('go'));
    assert.equal(again.ok, true, JSON.stringify(again));
    assert.equal(again.result.output, 'fine');
  });

  test('a panic in the binding around a stream batch is InternalError, and the process goes on', async () => {
    const model = new FunctionModel(() => 'fine');
    const agent = new Agent({ model });
    native._testingPanicNext();
    await assert.rejects(
      (async () => {
        for await (const _ of agent.stream('go'));
      })(),
      (e) => {
        assert.ok(e instanceof InternalError, e.stack);
        assert.match(e.message, /a panic forced by a test/);
        return true;
      },
    );
    const events = [];
    for await (const event of agent.stream('go')) events.push(event);
    assert.equal(events.at(-1).result.output, 'fine');
  });
});

// A child process: a tool that never answers is in flight; then the process exits (`exit`), the run is
// cancelled and the script returns (`return`), or the tool answers after its run was cancelled (`late`).
// `abort` is the control: the same harness sees a process that dies.
const CHILD = `
const ambit = require(${JSON.stringify(path.resolve(__dirname, '..'))});
const [baseUrl, mode] = process.argv.slice(2);
let started;
const startedP = new Promise((r) => { started = r; });
const busy = ambit.tool({ name: 'busy', description: 'Slow.', parameters: { type: 'object', properties: {} },
  run: () => { started(); return mode === 'late' ? new Promise((r) => setImmediate(() => r('late'))) : new Promise(() => {}); } });
(async () => {
  const agent = new ambit.Agent({ model: new ambit.OpenAIChat('m', { baseUrl, apiKey: 'k', maxRetries: 0 }), tools: [busy] });
  const it = agent.stream('go')[Symbol.asyncIterator]();
  it.next().then(async function loop(r) { if (!r.done) return it.next().then(loop); return r; }).catch(() => {});
  await startedP;
  if (mode === 'exit') { console.log('in flight; exiting'); process.exit(0); }
  if (mode === 'abort') { console.log('in flight; exiting'); process.abort(); }
  await it.return();
  console.log('in flight; exiting');
})();
`;

describe('exit with a tool in flight (item 8)', () => {
  for (const mode of ['exit', 'return', 'late', 'abort']) {
    test(`${mode === 'abort' ? 'control: ' : ''}the process ${mode === 'abort' ? 'dies and the harness sees it' : 'exits cleanly'} (${mode})`, async () => {
      const p = await startProvider('busy');
      try {
        const script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-exit-')), 'child.js');
        fs.writeFileSync(script, CHILD);
        const out = spawnSync(process.execPath, [script, p.baseUrl, mode], { encoding: 'utf8', timeout: 60_000 });
        assert.match(out.stdout, /in flight; exiting/, out.stderr);
        const clean = out.status === 0 && out.signal === null && !/FATAL|panicked|Aborted/.test(out.stderr);
        assert.equal(clean, mode !== 'abort', `status ${out.status}, signal ${out.signal}: ${out.stderr}`);
      } finally {
        p.stop();
      }
    });
  }
});

describe('configuration inputs (item 10)', () => {
  const listing = (agent) => Object.fromEntries(agent.listTools().map((t) => [t.name, t.status]));

  test('a bare string is a one-entry list in the policy', () => {
    const blocked = new Agent({ model: offline, builtins: ['shell_execute', 'file_read'], policy: { level: 'read', blockTools: 'shell_execute' } });
    assert.deepEqual(listing(blocked), { shell_execute: 'blocked', file_read: 'offered' });
    const allowed = new Agent({ model: offline, builtins: ['shell_execute', 'file_read'], policy: { allowTools: 'file_read' } });
    assert.deepEqual(listing(allowed), { shell_execute: 'blocked', file_read: 'offered' });
    new Agent({ model: offline, policy: { workspaceDirectories: os.tmpdir(), readableDirectories: '/usr' } });
  });

  test('control: without the filter the tool is offered', () => {
    const open = new Agent({ model: offline, builtins: ['shell_execute', 'file_read'], policy: { level: 'unrestricted' } });
    assert.deepEqual(listing(open), { shell_execute: 'offered', file_read: 'offered' });
  });

  test('a bare string is a one-entry list in every other list option', () => {
    assert.deepEqual(listing(new Agent({ model: offline, builtins: 'file_read' })), { file_read: 'offered' });
    const t = tool({ name: 'note', description: 'd', parameters: { type: 'object', properties: {} }, run: () => 'x', allowBlank: 'text' });
    assert.deepEqual(t.allowBlank, ['text']);
    const server = ambit.McpServer.stdio('s', 'cmd', '--verbose', { eagerLoadTools: 'read_file' });
    assert.deepEqual(server.transport.args, ['--verbose']);
  });

  test('a wrong type is a ConfigError naming the option', () => {
    configError(() => new Agent({ model: offline, policy: { blockTools: 5 } }), 'policy.blockTools');
    configError(() => new Agent({ model: offline, policy: { allowTools: ['file_read', 3] } }), 'policy.allowTools[1]');
    configError(() => new Agent({ model: offline, policy: { workspaceDirectories: { a: 1 } } }), 'policy.workspaceDirectories');
    configError(() => new Agent({ model: offline, policy: { levelOverrides: ['x'] } }), 'policy.levelOverrides');
    configError(() => new Agent({ model: offline, builtins: 7 }), 'builtins');
    configError(() => tool({ name: 'n', parameters: { type: 'object' }, run: () => '', allowBlank: 5 }), 'allowBlank');
    configError(() => ambit.McpServer.stdio('s', 'cmd', 5), 'args');
    configError(() => new Agent({ model: offline, mcpServers: [ambit.McpServer.http('s', 'http://x', { eagerLoadTools: 1 })] }), 'eagerLoadTools');
    configError(() => new Agent({ model: offline, deferral: { deferrableTools: null } }), 'deferrableTools');
  });

  test('an unknown option is a ConfigError naming it', () => {
    configError(() => new Agent({ model: offline, maxturns: 3 }), "'maxturns'");
    configError(() => new Agent({ model: offline, policy: { level: 'read', blocktools: ['x'] } }), "'blocktools'");
    configError(() => new OpenAIChat('m', { baseURL: 'http://127.0.0.1:9/v1' }), "'baseURL'");
    configError(() => tool({ name: 'n', parameters: { type: 'object' }, run: () => '', requireApproval: true }), "'requireApproval'");
  });

  for (const name of ['', '   ']) {
    test(`a blank tool name (${JSON.stringify(name)}) is refused`, () => {
      const blank = tool({ name, description: 'd', parameters: { type: 'object', properties: {} }, run: () => '' });
      configError(() => new Agent({ model: offline, tools: [blank] }), 'name');
    });
  }
});

// SPEC §3: a per-endpoint max_tool_name_bytes, smaller than the wire's own limit.
describe('maxToolNameBytes', () => {
  test('cuts names to fit, runs the call by the whole name, and is never above the wire', async () => {
    const crypto = require('node:crypto');
    const whole = 'lookup_the_current_weather_for_a_city';
    const cut = `${whole.slice(0, 24 - 13)}_${crypto.createHash('sha256').update(whole).digest('hex').slice(0, 12)}`;
    const p = await startScenario({ name: 'short_names', exchanges: [
      { expect: { tool_names: [cut] },
        respond: { tool_calls: [{ id: 'c1', name: cut, arguments: { city: 'Oslo' } }] } },
      { respond: { content: 'done' } },
    ] });
    try {
      const weather = tool({
        name: whole, description: 'Current weather for a city.',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        run: ({ city }) => `sunny in ${city}`,
      });
      const model = new OpenAIChat('m', { baseUrl: p.baseUrl, apiKey: 'k', maxRetries: 0, maxToolNameBytes: 24 });
      const result = await new Agent({ model, tools: [weather] }).run('weather?');
      assert.equal(result.toolCalls[0].name, whole);
      assert.equal(result.toolCalls[0].result, 'sunny in Oslo');
    } finally {
      p.stop();
    }
    assert.throws(() => new Agent({ model: new OpenAIChat('m', { maxToolNameBytes: 65 }) }), (e) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.match(e.message, /max_tool_name_bytes 65 is larger than the openai_chat wire's own limit of 64/);
      return true;
    });
    assert.throws(() => new Agent({ model: new ambit.Anthropic('m', { maxToolNameBytes: 10.5 }) }),
      /max_tool_name_bytes must be a whole number, 0 or more; got 10.5/);
  });
});

// Issue 14, item 1: model settings as options; a bad value, a setting the wire lacks and an unknown
// option are refused naming them, never dropped.
describe('model settings', () => {
  const refused = (build, words) => assert.throws(build, (e) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, words);
    return true;
  });
  test('a bad value or a setting the wire lacks is a ConfigError naming it', () => {
    refused(() => new Agent({ model: new OpenAIChat('m', { temperature: 2.5 }) }), /temperature must be between 0 and 2, got 2.5/);
    refused(() => new Agent({ model: new OpenAIChat('m', { topP: 1.5 }) }), /top_p must be between 0 and 1, got 1.5/);
    refused(() => new Agent({ model: new OpenAIChat('m', { maxOutputTokens: 0 }) }), /max_output_tokens must be at least 1/);
    refused(() => new Agent({ model: new OpenAIChat('m', { stop: ['a', 'b', 'c', 'd', 'e'] }) }), /stop takes 1 to 4 texts, got 5/);
    refused(() => new Agent({ model: new OpenAIChat('m', { toolChoice: 'any' }) }), /tool_choice must be "auto", "required", "none"/);
    refused(() => new OpenAIChat('m', { temperature: NaN }), /options.temperature must be a finite number, got NaN/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { seed: 7 }) }), /seed is not a setting of the anthropic wire/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { temperature: 0.5 }) }), /temperature is not a setting of the anthropic wire/);
    refused(() => new Agent({ model: new ambit.OpenAIResponses('m', { stop: ['END'] }) }), /stop is not a setting of the openai_responses wire/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { maxTokens: 10, maxOutputTokens: 20 }) }),
      /max_tokens \(10\) and max_output_tokens \(20\) are the same setting/);
  });
  test('an unknown option is refused naming it; maxTokens off Anthropic points to maxOutputTokens', () => {
    refused(() => new OpenAIChat('m', { temprature: 1 }), /unknown option 'temprature'/);
    refused(() => new OpenAIChat('m', { maxTokens: 10 }), /OpenAIChat: unknown option 'maxTokens' \(an Anthropic option\); use maxOutputTokens/);
    refused(() => new ambit.OpenAIResponses('m', { maxTokens: 10 }), /use maxOutputTokens/);
    // Negative control: the same settings in range, on wires that have them, build.
    new Agent({ model: new OpenAIChat('m', { temperature: 2, topP: 0, maxOutputTokens: 1, stop: ['a'], seed: 7,
      toolChoice: { name: 'f' }, parallelToolCalls: false }) });
    new Agent({ model: new ambit.Anthropic('m', { maxTokens: 10, maxOutputTokens: 10, stop: ['x'], toolChoice: 'none' }) });
  });
  // Issue 14, items 1 and 5: reasoning, thinking, text tool calls, headers and query parameters.
  test('reasoning, thinking, text tool calls, headers and query: refused by name where wrong', () => {
    refused(() => new Agent({ model: new OpenAIChat('m', { reasoningEffort: 'extreme' }) }), /reasoning_effort must be one of none, minimal/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { reasoningEffort: 'minimal' }) }),
      /reasoning_effort "minimal" is not a value of the anthropic wire/);
    refused(() => new Agent({ model: new OpenAIChat('m', { thinkingBudget: 2048 }) }),
      /thinking_budget is not a setting of the openai_chat wire; use reasoning_effort/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { thinkingBudget: 8000 }) }),
      /thinking_budget \(8000\) must be less than max_tokens \(4096\)/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { textToolCalls: 'auto' }) }),
      /text_tool_calls is not a setting of the anthropic wire/);
    refused(() => new Agent({ model: new OpenAIChat('m', { textToolCalls: 'on' }) }), /text_tool_calls must be "off", "auto" or "constrained"/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { thinkingBudget: 2048, toolChoice: 'required' }) }),
      /tool_choice "required" cannot be used with thinking_budget/);
    refused(() => new Agent({ model: new OpenAIChat('m', { store: false }) }), /store is not a setting of the openai_chat wire/);
    refused(() => new Agent({ model: new ambit.Anthropic('m', { strict: true }) }), /strict is not a setting of the anthropic wire/);
    new Agent({ model: new ambit.Anthropic('m', { thinkingBudget: 2048, toolChoice: 'none' }) });
    new Agent({ model: new ambit.OpenAIResponses('m', { store: false, strict: false }) });
    refused(() => new Agent({ model: new OpenAIChat('m', { headers: { 'Content-Type': 'text/plain' } }) }),
      /headers: Content-Type is set by the HTTP exchange itself/);
    refused(() => new Agent({ model: new OpenAIChat('m', { headers: { 'api-key': 7 } }) }), /headers: the value of api-key must be a text/);
    refused(() => new Agent({ model: new OpenAIChat('m', { query: { '': 'x' } }) }), /query: a parameter name is empty/);
    refused(() => new Agent({ model: new ambit.OpenAIResponses('m', { promptCaching: true }) }),
      /prompt_caching is not a setting of the openai_responses wire/);
    assert.throws(() => new OpenAIChat('m', { headers: ['api-key'] }), /options.headers must be an object of texts/);
    refused(() => new OpenAIChat('m', { header: {} }), /unknown option 'header'/);
    // Negative control: good ones build.
    new Agent({ model: new OpenAIChat('m', { reasoningEffort: 'low', textToolCalls: 'constrained',
      headers: { 'api-key': 'k', 'OpenAI-Project': 'p' }, query: { 'api-version': '2024-10-21' } }) });
    new Agent({ model: new ambit.Anthropic('m', { thinkingBudget: 2048, maxOutputTokens: 4096, reasoningEffort: 'max' }) });
  });
});
