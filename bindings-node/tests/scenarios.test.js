'use strict';
// Runs every scenario of tests/scenarios/ (the same files the Rust, Python and Swift suites run)
// against the loopback provider, plus the binding's own checks of bad input.
//
// The provider binary is `ambit-provider` from `cargo build -p ambit-test-provider`; it is looked up
// in $AMBIT_PROVIDER, then $CARGO_TARGET_DIR/debug, then ~/.cache/ambit/target/debug (scripts/env.sh).

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn, execFileSync } = require('node:child_process');

const {
  Agent,
  OpenAIChat,
  OpenAIResponses,
  Anthropic,
  BudgetError,
  tool,
  AmbitError,
  ConfigError,
  ModelError,
  MaxTurnsError,
  OutputTruncatedError,
  OutputInvalidError,
  InvalidMessageError,
  CancelledError,
  McpServer,
  Ledger,
  Memory,
  Knowledge,
  Sessions,
  AwaitingApprovalError,
  TestModel,
  FunctionModel,
  Credentials,
  HookFailedError,
  GuardrailTrippedError,
  Text,
  Image,
  File,
} = require('..');
const native = require('../native.js');

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
function startProvider(file, vars = {}) {
  // `vars`: values for `{{name}}` in the scenario's expectations.
  const args = Object.entries(vars).flatMap(([k, v]) => ['--var', `${k}=${v}`]);
  const child = spawn(providerPath(), ['--exit-on-eof', ...args, file], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const stop = () => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  };
  const base = new Promise((resolve, reject) => {
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
  return base.then((p) => ({
    ...p,
    /** `GET /__ambit/state`: what the provider served, its mismatches, the requests abandoned. */
    state: async () => (await fetch(p.baseUrl.replace(/\/v1$/, '/__ambit/state'))).json(),
  }));
}

/**
 * Every scripted exchange was used and none mismatched; `expect.abandoned`: the requests whose client
 * hung up before the answer (polled for a while: the hang-up may reach the provider after the run ends).
 */
async function checkProvider(scenario, provider) {
  const want = scenario.expect.abandoned;
  let state = await provider.state();
  for (let i = 0; i < 1000 && want && state.abandoned.length < want.length; i++) {
    await new Promise((r) => setTimeout(r, 10));
    state = await provider.state();
  }
  if (want) assert.deepEqual(state.abandoned, want, 'abandoned requests');
  assert.deepEqual(state.mismatches, [], 'provider mismatches');
  assert.equal(state.remaining, 0, `scripted exchanges left unused (served ${state.served})`);
  // `absent_from_requests`: texts no request holds (a run context never reaches the model).
  for (const text of scenario.expect.absent_from_requests || []) {
    state.requests.forEach((r, n) => assert.ok(!JSON.stringify(r.body).includes(text), `request ${n + 1} holds ${text}`));
  }
}

/**
 * `cancel`: the run (mode `run`: `agent.run`; `stream`: iterating `agent.stream`) gets an AbortSignal,
 * aborted once the provider has received request `at_request` (which it holds with its `delay_ms`); it
 * must end with a CancelledError.
 */
async function cancelWhenReached(scenario, provider, agent, input, mode) {
  const controller = new AbortController();
  const options = { signal: controller.signal };
  const run =
    mode === 'stream'
      ? (async () => {
          for await (const e of agent.stream(input, options)) if (e.type === 'run_finished') return e.result;
          return undefined;
        })()
      : agent.run(input, options);
  let ended = false;
  const outcome = run.then(
    (result) => {
      ended = true;
      return { result };
    },
    (error) => {
      ended = true;
      return { error };
    },
  );
  // Bounded polling on a real condition: the provider has the request.
  for (let i = 0; i < 1000 && !ended && (await provider.state()).served < scenario.cancel.at_request; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  if (ended) assert.fail(`the run ended before it was cancelled: ${JSON.stringify(await outcome)}`);
  controller.abort();
  const { result, error } = await outcome;
  assert.ok(error instanceof CancelledError, `expected a CancelledError, got ${error ? error.stack : JSON.stringify(result)}`);
  assert.equal(error.code, 'cancelled');
}

/** Replaces every `{arg}` with that argument's value (a string as it is, anything else as JSON). */
function substitute(text, args) {
  return text.replace(/\{([^{}]+)\}/g, (whole, key) => {
    if (!Object.prototype.hasOwnProperty.call(args, key)) return whole;
    const value = args[key];
    return typeof value === 'string' ? value : JSON.stringify(value);
  });
}

/** Names of `until_cancelled` tools that saw their task's cancellation token. */
const sawCancel = [];

/** What `waits_for_release` tools wait on: opened by a session step's `release`. */
let release = null;

function scenarioTool(spec) {
  const { behavior } = spec;
  let run;
  if (behavior.waits_for_release) {
    // Progress through the task context, then hold until the suite releases it (after the run that
    // started it ended: work that outlives the run).
    run = async (args, ctx) => {
      if (behavior.progress) ctx.progress(substitute(behavior.progress, args));
      await release.opened;
      return substitute(behavior.returns, args);
    };
  } else if (behavior.until_cancelled) {
    // Progress through the task context (run's second argument), then wait on the cancellation token
    // and unwind. The timers do not keep the process alive.
    run = async (args, ctx) => {
      ctx.progress(substitute(behavior.progress, args));
      for (let i = 0; i < 2000; i++) {
        if (ctx.cancelled) {
          sawCancel.push(spec.name);
          return 'stopped';
        }
        await new Promise((resolve) => setTimeout(resolve, 10).unref());
      }
      return substitute(behavior.returns, args);
    };
  } else if (behavior.returns_image) {
    // The text, then the image: a result of parts, its image sent in the wire's tool-result blocks.
    const image = behavior.returns_image;
    run = async (args) => [
      new Text(substitute(image.text, args)),
      ...Array.from({ length: behavior.repeat ?? 1 }, () =>
        Image.fromBytes(Buffer.from(image.data, 'base64'), image.media_type)),
    ];
  } else if (Object.prototype.hasOwnProperty.call(behavior, 'returns')) {
    run = async (args, ctx) => substitute(withCredentials(behavior.returns, spec, ctx), args);
  } else if (Object.prototype.hasOwnProperty.call(behavior, 'raises')) {
    run = async (args, ctx) => {
      throw new Error(substitute(withCredentials(behavior.raises, spec, ctx), args));
    };
  } else {
    throw new Error(`unknown tool behavior in scenario: ${JSON.stringify(behavior)}`);
  }
  if (behavior.sleeps_ms != null) {
    // A slow job (a background task the scenario cancels); the timer does not keep the process alive.
    const act = run;
    run = async (args) => {
      await new Promise((resolve) => setTimeout(resolve, behavior.sleeps_ms).unref());
      return act(args);
    };
  }
  return tool({
    name: spec.name,
    description: spec.description,
    parameters: spec.parameters,
    run,
    level: spec.level,
    requiresApproval: spec.requires_approval,
    allowBlank: spec.allow_blank,
    credentials: spec.credentials,
  });
}

/** A scenario's `context`, as the JavaScript value this suite passes to each run (`{ context }`). */
class ScenarioContext {
  constructor(data) {
    this.data = data;
  }
}

/** The options every run of `scenario` gets: its `context`, when it has one. */
function runOptions(scenario) {
  return scenario.context ? { context: new ScenarioContext(scenario.context) } : {};
}

/**
 * A run's input: a step's `messages` (the core's form, its keys made camelCase as the Node API takes
 * them), `history: true` (the previous run's `result.messages`, then the step's `input` as a user
 * message), or its `input`.
 */
function stepInput(step, previous) {
  const camel = (m) =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]));
  if (step.messages) return step.messages.map((m) => (m && typeof m === 'object' ? camel(m) : m));
  if (step.history) {
    assert.ok(previous, 'history without an earlier run');
    return [...previous.messages, { role: 'user', content: step.input }];
  }
  return step.input;
}

/** `{credential:alias}` in a behavior's text: the declared credential, read from the tool's context. */
function withCredentials(text, spec, ctx) {
  let out = text;
  for (const alias of spec.credentials ?? []) out = out.split(`{credential:${alias}}`).join(ctx.credential(alias));
  // `{context:key}`: the run context's field.
  if (out.includes('{context:')) {
    for (const [k, v] of Object.entries(ctx.context.data)) out = out.split(`{context:${k}}`).join(String(v));
  }
  return out;
}

/** `credentials` (the broker as data) with `credential_callbacks`, answered by an async function. */
function scenarioCredentials(scenario) {
  if (!scenario.credentials) return undefined;
  const creds = new Credentials();
  const answers = scenario.credential_callbacks ?? {};
  for (const [alias, source] of Object.entries(scenario.credentials.credentials ?? {})) {
    if (source.value != null) creds.value(alias, source.value);
    else if (source.env != null) creds.env(alias, source.env);
    else creds.callback(alias, async (a) => String(answers[a]));
  }
  for (const [name, alias] of Object.entries(scenario.credentials.shell_env ?? {})) creds.shellEnv(name, alias);
  for (const r of scenario.credentials.web_fetch ?? []) creds.webFetch(r.host, r.alias, { header: r.header, prefix: r.prefix });
  return creds;
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
  budget_exceeded: BudgetError,
  output_truncated: OutputTruncatedError,
  output_invalid: OutputInvalidError,
  invalid_message: InvalidMessageError,
  hook_failed: HookFailedError,
  guardrail_tripped: GuardrailTrippedError,
  cancelled: CancelledError,
};

function checkResult(result, expect) {
  if ('output' in expect) assert.equal(result.output, expect.output, 'output');
  if ('structured_output' in expect) assert.deepEqual(result.structuredOutput, expect.structured_output, 'structuredOutput');
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
  if ('open_items' in expect) {
    assert.deepEqual(
      result.openItems.map((i) => i.text),
      expect.open_items,
      'openItems',
    );
  }
  if ('stop_reason' in expect) assert.equal(result.stopReason, expect.stop_reason, 'stopReason');
  if ('cost' in expect) {
    assert.ok(typeof result.cost === 'number' && Math.abs(result.cost - expect.cost) <= 1e-12, `cost ${result.cost}`);
  }
  if ('usage' in expect) {
    for (const [key, value] of Object.entries(expect.usage)) {
      assert.ok(key in CAMEL, `unknown usage field in scenario: ${key}`);
      assert.equal(result.usage[CAMEL[key]], value, `usage.${CAMEL[key]}`);
    }
  }
}

/** `block_tools` → `blockTools`: a scenario file's snake_case keys as the JS API spells them. */
function camelCase(key) {
  return key.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
}

/**
 * The host's approval handler in a scenario (an async function): answers from `approvals`, in order,
 * and records every request it gets.
 */
function scriptedApprovals(scenario) {
  const answers = [...(scenario.approvals ?? [])];
  const requests = [];
  const handler = async (request) => {
    requests.push(request);
    await new Promise((r) => setImmediate(r));
    if (answers.length === 0) throw new Error('the scenario has no answer left');
    return answers.shift();
  };
  return { handler, requests };
}

/** The scenario's `policy` as the JS options: camelCase keys, `approvals: true` → the host handler. */
/**
 * Writes the scenario's fixture into a fresh temporary directory T: `fixture.files` into T/ws (the
 * working directory), `fixture.outside` into T/outside (beyond the session's reach).
 */
function writeFixture(scenario) {
  const { fixture } = scenario;
  if (!fixture) return null;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-fixture-'));
  for (const [key, sub] of [
    ['files', 'ws'],
    ['outside', 'outside'],
  ]) {
    fs.mkdirSync(path.join(root, sub));
    for (const [name, spec] of Object.entries(fixture[key] || {})) {
      const text = 'text' in spec ? spec.text : `${spec.line}\n`.repeat(spec.count);
      fs.mkdirSync(path.dirname(path.join(root, sub, name)), { recursive: true });
      fs.writeFileSync(path.join(root, sub, name), text);
    }
  }
  return path.join(root, 'ws');
}

function scenarioPolicy(scenario, approvals) {
  const fixture = writeFixture(scenario);
  if (!scenario.policy && !fixture) return {};
  const policy = fixture ? { workingDirectory: fixture } : {};
  for (const [key, value] of Object.entries(scenario.policy || {})) {
    if (key === 'approvals') {
      if (value === true) policy.approvals = approvals.handler;
    } else {
      policy[camelCase(key)] = value;
    }
  }
  return { policy };
}

/** A step's `with_policy` as the JS policy: camelCase keys, `approvals: true` → the host handler. */
function stepPolicy(policy, approvals) {
  const out = {};
  for (const [key, value] of Object.entries(policy)) {
    if (key === 'approvals') {
      if (value === true) out.approvals = approvals.handler;
    } else {
      out[camelCase(key)] = value;
    }
  }
  return out;
}

/**
 * `steps`: every step but the last runs to its result (its `expect.output` checked), each first putting
 * the agent under its `with_policy`, or moves the ledger's manual clock (`advance_clock`); a step's
 * `expect.drain_decision` is checked after it. Resolves to the agent and the input of the last step,
 * which the caller runs as the mode says. Without `steps`: the agent and `input`.
 */
async function runSteps(scenario, agent, approvals, at) {
  if (!scenario.steps) return { agent, input: stepInput(scenario, undefined) };
  const narrow = async (a, step) => {
    // `new_agent`: a fresh agent built from the file (new MCP connections; the run's OAuth servers).
    if (step.new_agent) a = await at.rebuild();
    return step.with_policy ? a.withPolicy(stepPolicy(step.with_policy, approvals)) : a;
  };
  const earlier = scenario.steps.slice(0, -1);
  const last = scenario.steps[scenario.steps.length - 1];
  let previous;
  for (const [i, step] of earlier.entries()) {
    if ('advance_clock' in step) {
      assert.ok(at.clock, `step ${i + 1}: advance_clock without ledger.clock_ms`);
      at.clock.advance(step.advance_clock);
    } else {
      agent = await narrow(agent, step);
      const result = await agent.run(stepInput(step, previous), runOptions(scenario));
      if (step.expect && 'output' in step.expect) assert.equal(result.output, step.expect.output, `step ${i + 1}: output`);
      previous = result;
    }
    await checkDrain(scenario, at, step);
  }
  return { agent: await narrow(agent, last), input: stepInput(last, previous) };
}

/** `expect.tool_list`: same length as listTools(), each entry's given keys equal. */
function checkToolList(got, want) {
  assert.equal(got.length, want.length, `listTools() length: ${JSON.stringify(got)}`);
  want.forEach((w, i) => {
    for (const [key, value] of Object.entries(w)) {
      assert.ok(camelCase(key) in got[i], `listTools()[${i}] has no ${camelCase(key)}`);
      assert.deepEqual(got[i][camelCase(key)], value, `listTools()[${i}].${camelCase(key)}`);
    }
  });
}

/** `expect.approval_requests`: same length as the recorded requests, each entry's given keys equal. */
function checkApprovalRequests(got, want) {
  assert.equal(got.length, want.length, `approval requests: ${JSON.stringify(got)}`);
  want.forEach((w, i) => {
    for (const [key, value] of Object.entries(w)) {
      assert.ok(camelCase(key) in got[i], `approval request ${i} has no ${camelCase(key)}`);
      assert.deepEqual(got[i][camelCase(key)], value, `approval request ${i}: ${camelCase(key)}`);
    }
  });
}

/** Where scripts/mcp-servers.sh installed the MCP servers (idempotent; run once). */
let mcpDirCache;
function mcpDir() {
  mcpDirCache ??= execFileSync('bash', [path.join(REPO, 'scripts', 'mcp-servers.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return mcpDirCache;
}

/**
 * The MCP URL of the run's `oauth` server `name` (tests/mcp/oauth_server.py with `args`), started the
 * first time; `at.oauthProcs` are stopped when the run ends.
 */
async function oauthServer(at, name, args) {
  if (!(name in at.oauth)) {
    const python = path.join(mcpDir(), 'venv', 'bin', 'python');
    const child = spawn(python, [path.join(REPO, 'tests', 'mcp', 'oauth_server.py'), ...args], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    at.oauthProcs.push(child);
    const lines = readline.createInterface({ input: child.stdout });
    const [url] = await Promise.race([
      new Promise((resolve) => lines.once('line', (l) => resolve([l]))),
      new Promise((_, reject) => child.once('exit', (c) => reject(new Error(`oauth_server.py exited: ${c}`)))),
    ]);
    lines.close();
    at.oauth[name] = url.trim();
  }
  return at.oauth[name];
}

/**
 * The user's consent, headless: fetches the authorization URL with a plain HTTP client (the test server
 * approves at once, or denies when the URL carries `consent=deny`) and hands back the redirect's URL, as
 * a browser sent back to the redirect URI would.
 */
function headlessConsent(deny) {
  return async (url) => {
    const answer = await fetch(deny ? `${url}&consent=deny` : url, { redirect: 'manual' });
    const location = answer.headers.get('location');
    if (!location) throw new Error(`the authorization endpoint did not redirect: ${answer.status}`);
    return location;
  };
}

/**
 * A server's `oauth` field as the JS options: `token_store` `file` is a token file in the run's
 * directory (shared by every agent of the run), `memory` (default) none; the headless consent.
 */
function scenarioOAuth(o, name, at) {
  assert.ok(['memory', 'file'].includes(o.token_store ?? 'memory'), `oauth.token_store: ${o.token_store}`);
  assert.ok(['approve', 'deny'].includes(o.consent ?? 'approve'), `oauth.consent: ${o.consent}`);
  const code = (o.grant ?? 'authorization_code') === 'authorization_code';
  return {
    grant: o.grant,
    clientName: o.client_name,
    scopes: o.scopes,
    clientId: o.client_id,
    clientSecret: o.client_secret,
    redirectUri: code ? 'http://127.0.0.1:1/callback' : undefined,
    onAuthorize: code ? headlessConsent(o.consent === 'deny') : undefined,
    tokenStore: o.token_store === 'file' ? path.join(at.dir, `tokens-${name}.json`) : undefined,
  };
}

/** `expect.oauth_stats`: each `oauth` server's counters (`GET /stats`), the keys named, equal. */
async function checkOAuthStats(scenario, at) {
  for (const [name, want] of Object.entries(scenario.expect.oauth_stats ?? {})) {
    assert.ok(name in at.oauth, `oauth_stats: no oauth server '${name}' was started`);
    const stats = await (await fetch(`${at.oauth[name].replace(/\/mcp$/, '')}/stats`)).json();
    for (const [k, v] of Object.entries(want)) {
      assert.deepEqual(stats[k], v, `oauth_stats.${name}.${k} (all: ${JSON.stringify(stats)})`);
    }
  }
}

/**
 * The scenario's `mcp_servers` and `deferral` as the JS options; `server` names a real server, run over
 * stdio (`oauth`: over HTTP, one per run of the file).
 */
async function scenarioTooling(scenario, at) {
  const out = {};
  if (scenario.mcp_servers) {
    out.mcpServers = [];
    for (const { name, server, server_args: args, oauth, ...settings } of scenario.mcp_servers) {
      const options = Object.fromEntries(Object.entries(settings).map(([k, v]) => [camelCase(k), v]));
      if (server === 'oauth') {
        const url = await oauthServer(at, name, args ?? []);
        out.mcpServers.push(McpServer.http(name, url, { ...options, oauth: scenarioOAuth(oauth, name, at) }));
      } else {
        out.mcpServers.push(plainServer(name, server, options));
      }
    }
  }
  if (scenario.deferral) {
    out.deferral = Object.fromEntries(Object.entries(scenario.deferral).map(([k, v]) => [camelCase(k), v]));
  }
  return out;
}

/** A scenario's MCP server of kind `server` (not `oauth`), over stdio. */
function plainServer(name, server, options) {
  if (server === 'dynamic') {
    // tests/mcp/dynamic_server.py: adds a tool at run time.
    const script = path.join(REPO, 'tests', 'mcp', 'dynamic_server.py');
    return McpServer.stdio(name, path.join(mcpDir(), 'venv', 'bin', 'python'), [script], options);
  }
  // A server whose command does not exist.
  if (server === 'unavailable') return McpServer.stdio(name, '/nonexistent/ambit-mcp-server', [], options);
  assert.equal(server, 'everything', `unknown MCP server in scenario: ${server}`);
  const js = path.join(mcpDir(), 'npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  return McpServer.stdio(name, 'node', [js, 'stdio'], options);
}

const MODELS = { openai_chat: OpenAIChat, anthropic: Anthropic, openai_responses: OpenAIResponses };

/** The event types `AgentEvent` in index.d.ts declares: every event a run yields must be one of them. */
const TYPED_EVENTS = (() => {
  const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
  const union = dts.slice(dts.indexOf('export type AgentEvent ='), dts.indexOf(';\n\n', dts.indexOf('export type AgentEvent =')));
  return new Set([...union.matchAll(/\{ type: '([a-z_]+)'/g)].map((m) => m[1]));
})();

/** Runs through `agent.stream`: checks the events, returns the result as `run` would. */
async function viaStream(agent, scenario, input) {
  const events = [];
  for await (const e of agent.stream(input, runOptions(scenario))) events.push(e);
  const finished = events.pop();
  assert.equal(finished.type, 'run_finished');
  assert.deepEqual(finished.usage, finished.result.usage);
  assert.equal(events[0].type, 'run_started');
  // A history's run reports its last user message as its input.
  const started = typeof input === 'string' ? input : input[input.length - 1].content;
  if (Array.isArray(started)) {
    // A message of parts: its text view, the first part's text first.
    assert.ok(events[0].input.startsWith(`${started[0].text}\n[image `), events[0].input);
  } else {
    assert.equal(events[0].input, started);
  }
  const text = events.filter((e) => e.type === 'text_delta').map((e) => e.text).join('');
  assert.ok(text.endsWith(finished.result.output), `text deltas ${JSON.stringify(text)}`);
  const types = events.map((e) => e.type);
  for (const type of types) assert.ok(TYPED_EVENTS.has(type), `event ${type} is not in index.d.ts's AgentEvent`);
  const approvals = events.filter((e) => e.type === 'approval_requested');
  for (const e of approvals) assert.equal(typeof e.request.callId, 'string', 'approval_requested carries the request');
  let at = 0;
  for (const want of scenario.expect.events || []) {
    const i = types.indexOf(want, at);
    assert.ok(i >= 0, `event ${want} missing (in order) from ${types.join(', ')}`);
    at = i + 1;
  }
  for (const absent of scenario.expect.absent_events || []) {
    assert.ok(!types.includes(absent), `event ${absent} was sent, and must not be: ${types.join(', ')}`);
  }
  if ('stop_reasons' in scenario.expect) {
    const got = events.filter((e) => e.type === 'model_response').map((e) => e.stopReason);
    assert.deepEqual(got, scenario.expect.stop_reasons, 'stop reasons of the model_response events');
  }
  if ('from_text' in scenario.expect) {
    const got = events.filter((e) => e.type === 'tool_call_requested' && e.fromText).map((e) => e.name);
    assert.deepEqual(got, scenario.expect.from_text, 'the calls read from text');
  }
  if ('streamed_text' in scenario.expect) {
    assert.equal(text, scenario.expect.streamed_text, 'the text deltas');
  }
  return finished.result;
}

/**
 * A ledger store: its URL (a fresh SQLite file, or the shared PostgreSQL database), the suffix the
 * scenario's scope, routine id and run id get there (none on SQLite; unique on PostgreSQL), and the
 * manual clock (the test hook) of a scenario with `ledger.clock_ms` (null: the system clock).
 */
function ledgerAt(store, scenario = {}) {
  const start = scenario.ledger && scenario.ledger.clock_ms;
  const clock = start == null ? null : new native.TestingClock(start);
  if (store === 'sqlite') {
    const url = `sqlite://${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-ledger-')), 'ledger.db')}`;
    return { url, suffix: '', clock, ...runOwn() };
  }
  return { url: process.env.AMBIT_TEST_POSTGRES_URL, suffix: `-${crypto.randomUUID().slice(0, 18)}`, clock, ...runOwn() };
}

/**
 * What one run of a file has of its own beside the ledger: its `oauth` servers' URLs by name and their
 * processes, a directory (token files), and `rebuild` (set by buildAgent: a step's `new_agent`).
 */
function runOwn() {
  return { oauth: {}, oauthProcs: [], dir: fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-run-')), rebuild: null };
}

/** The ledger at `at`, on its manual clock when it has one. */
async function openLedger(at) {
  return at.clock ? new Ledger(await native._testingOpenLedger(at.url, at.clock)) : Ledger.open(at.url);
}

/** `{{scope}}` and `{{routine_id}}` for the provider: the ledger's, as that store has them. */
function ledgerVars(scenario, at) {
  const cfg = scenario.ledger || {};
  return Object.fromEntries(['scope', 'routine_id'].filter((k) => cfg[k] != null).map((k) => [k, cfg[k] + at.suffix]));
}

/** `ledger`: the work ledger's four tools at `at`, bound to one run of a routine. */
async function scenarioLedger(scenario, at) {
  const cfg = scenario.ledger;
  if (!cfg) return undefined;
  const ledger = await openLedger(at);
  const sfx = at.suffix;
  return ledger.forRoutine(cfg.scope + sfx, {
    runId: cfg.run_id + sfx,
    routineId: cfg.routine_id == null ? undefined : cfg.routine_id + sfx,
    limit: cfg.limit,
  });
}

/**
 * `expect.drain_decision` of the scenario (or of one of its `steps`): what `Ledger.drainDecision` answers
 * for the routine's run (the default limits), on the ledger's clock: `stop` (null, or why) and `start_runs`.
 */
async function checkDrain(scenario, at, step = scenario) {
  const want = step.expect && step.expect.drain_decision;
  if (!want) return;
  const ledger = await openLedger(at);
  const got = await ledger.drainDecision(scenario.ledger.routine_id + at.suffix, scenario.ledger.run_id + at.suffix);
  for (const [key, value] of Object.entries(want)) {
    assert.deepEqual(got[camelCase(key)], value, `drainDecision().${camelCase(key)}`);
  }
}

/** A scenario's model settings (snake_case) as the model's camelCase options. */
function modelSettings(settings) {
  const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  return Object.fromEntries(Object.entries(settings).map(([k, v]) => [camel(k), v]));
}

/** `memory`: a fresh SQLite memory store (one per agent built: one per run of the file) and the name. */
async function scenarioMemory(scenario) {
  if (!scenario.memory) return {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-memory-'));
  return { memory: await Memory.open(`sqlite://${path.join(dir, 'memory.db')}`), agentName: scenario.memory.agent };
}

/** A scenario hook's `behavior` (tests/scenarios/README.md), the same in every suite. */
function hookAnswer(behavior, ctx, payload) {
  if ('raises' in behavior) throw new Error(behavior.raises);
  if (behavior.uppercase_result) return { replace: payload.result.toUpperCase() };
  if ('append_context' in behavior) return { replace: `${payload.result} [${ctx.context.data[behavior.append_context]}]` };
  if ('refuse' in behavior) return { refuse: behavior.refuse };
  if ('set_arguments' in behavior) return { replace: behavior.set_arguments };
  if ('append_instructions' in behavior) return { replace: { instructions: (payload.instructions ?? '') + behavior.append_instructions } };
  if ('set_preamble' in behavior && payload.tool_calls.length > 0) return { replace: { text: behavior.set_preamble } };
  return undefined;
}

/** A scenario guardrail's `behavior`: trips on a word (case-insensitively) in `input` or `output`. */
function guardrailAnswer(behavior, payload) {
  if ('raises' in behavior) throw new Error(behavior.raises);
  const text = 'input' in payload ? payload.input : payload.output;
  return text.toLowerCase().includes(behavior.trips_on.toLowerCase())
    ? { tripped: true, info: { matched: behavior.trips_on } }
    : { tripped: false };
}

/** `hooks`, `input_guardrails`, `output_guardrails`: plain functions, or async ones (`async: true`). */
function scenarioHooks(scenario) {
  const fn = (entry, answer) => (entry.async
    ? async (ctx, payload) => { await Promise.resolve(); return answer(entry.behavior, ctx, payload); }
    : (ctx, payload) => answer(entry.behavior, ctx, payload));
  const guard = (g) => ({ name: g.name, run: fn(g, (b, _ctx, p) => guardrailAnswer(b, p)) });
  return {
    hooks: (scenario.hooks ?? []).map((h) => ({ point: h.point, name: h.name, run: fn(h, hookAnswer) })),
    inputGuardrails: (scenario.input_guardrails ?? []).map(guard),
    outputGuardrails: (scenario.output_guardrails ?? []).map(guard),
  };
}

/** The scenario's agent at `baseUrl`, with the host approval handler `approvals`. */
async function buildAgent(scenario, baseUrl, approvals, at = ledgerAt('sqlite'), model = undefined) {
  at.rebuild = () => buildAgent(scenario, baseUrl, approvals, at, model);
  const Wire = MODELS[scenario.wire || 'openai_chat'];
  assert.ok(Wire, `unsupported wire: ${scenario.wire}`);
  const cfg = scenario.agent;
  const wireModel = (name, settings) =>
    new Wire(name, {
      baseUrl,
      apiKey: cfg.api_key,
      stream: scenario.stream ?? false,
      maxRetries: 0,
      ...modelSettings(settings ?? {}),
    });
  // `agent.profiles`: each a model of the same wire and provider, under its own name and settings.
  const profiles = cfg.profiles
    ? Object.fromEntries(Object.entries(cfg.profiles).map(([name, p]) => [name, wireModel(p.model, p.settings)]))
    : undefined;
  // `named_agents`: each an agent of its own (model, instructions, tools, policy) on the same provider.
  let agents;
  if (scenario.named_agents) {
    agents = {};
    for (const [name, n] of Object.entries(scenario.named_agents)) {
      const own = {
        name: `${scenario.name}/${name}`,
        wire: scenario.wire,
        stream: scenario.stream,
        agent: { model: n.model, api_key: cfg.api_key, instructions: n.instructions },
        tools: n.tools ?? [],
        policy: n.policy ?? {},
      };
      agents[name] = { agent: await buildAgent(own, baseUrl, approvals), description: n.description };
    }
  }
  return new Agent({
    profiles,
    agents,
    model: model ?? new Wire(cfg.model, {
      baseUrl,
      apiKey: cfg.api_key,
      stream: scenario.stream ?? false,
      // No retries unless the scenario counts on them; `timeout_secs` is the per-request timeout.
      maxRetries: cfg.max_retries ?? 0,
      timeout: cfg.timeout_secs,
      headers: cfg.headers,
      query: cfg.query,
      ...modelSettings(cfg.settings ?? {}),
    }),
    instructions: cfg.instructions,
    // `agent.output`: the final answer's type, given as a JSON Schema.
    outputType: cfg.output,
    tools: scenario.tools.map(scenarioTool),
    ...scenarioHooks(scenario),
    credentials: scenarioCredentials(scenario),
    builtins: scenario.builtins,
    ledger: await scenarioLedger(scenario, at),
    ...(await scenarioMemory(scenario)),
    skills: scenario.skills
      ? { dirs: scenario.skills.dirs, agentManaged: scenario.skills.agent_managed, indexEntries: scenario.skills.index_entries }
      : undefined,
    knowledge: scenario.knowledge
      ? new Knowledge(scenario.knowledge.dir, { inlineMaxBytes: scenario.knowledge.inline_max_bytes })
      : undefined,
    maxTurns: cfg.max_turns,
    maxConcurrency: cfg.max_concurrency,
    checklist: cfg.checklist,
    checklistNudgeCap: cfg.checklist_nudge_cap,
    background: cfg.background,
    scratchpad: cfg.scratchpad,
    subagents: cfg.subagents ? { maxDepth: cfg.subagents.max_depth, memory: cfg.subagents.memory } : undefined,
    maxTokens: cfg.budget ? cfg.budget.max_tokens : undefined,
    maxCost: cfg.budget ? cfg.budget.max_cost : undefined,
    prices: cfg.prices
      ? Object.fromEntries(
          Object.entries(cfg.prices).map(([m, p]) => [
            m,
            {
              inputPerMtok: p.input_per_mtok,
              outputPerMtok: p.output_per_mtok,
              cacheReadPerMtok: p.cache_read_per_mtok,
              cacheWritePerMtok: p.cache_write_per_mtok,
            },
          ]),
        )
      : undefined,
    ...scenarioPolicy(scenario, approvals),
    ...(await scenarioTooling(scenario, at)),
  });
}

async function runScenario(file, mode = 'run', store = 'sqlite') {
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8'));
  const at = ledgerAt(store, scenario);
  const provider = await startProvider(file, ledgerVars(scenario, at));
  const approvals = scriptedApprovals(scenario);
  try {
    const first = await buildAgent(scenario, provider.baseUrl, approvals, at);
    const { expect } = scenario;
    if (expect.tool_list) checkToolList(first.listTools(), expect.tool_list);
    const { agent, input } = await runSteps(scenario, first, approvals, at);
    if (scenario.cancel) {
      await cancelWhenReached(scenario, provider, agent, input, mode);
      await checkProvider(scenario, provider);
      return;
    }
    const go = () => (mode === 'stream' ? viaStream(agent, scenario, input) : agent.run(input, runOptions(scenario)));
    if (expect.error) {
      await assert.rejects(go(), (e) => {
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
        for (const [key, value] of Object.entries(expect.error.usage || {})) {
          assert.equal(e.usage[CAMEL[key]], value, `error usage.${CAMEL[key]}`);
        }
        if (expect.error.tools) assert.deepEqual(e.tools, expect.error.tools, 'OutputTruncatedError.tools');
        if ('attempt' in expect.error) assert.equal(e.attempt, expect.error.attempt, 'OutputInvalidError.attempt');
        if ('hook' in expect.error) assert.equal(e.hook, expect.error.hook, 'HookFailedError.hook');
        if ('guardrail' in expect.error) {
          assert.equal(e.guardrail, expect.error.guardrail, 'GuardrailTrippedError.guardrail');
          if ('verdict' in expect.error) assert.deepEqual(e.verdict, expect.error.verdict, 'GuardrailTrippedError.verdict');
        }
        return true;
      });
      await checkOAuthStats(scenario, at);
      await checkProvider(scenario, provider);
    } else {
      let result;
      try {
        result = await go();
      } catch (e) {
        throw new Error(`the run failed: ${e.message} (code ${e.code}); provider stderr: ${provider.stderr()}`);
      }
      checkResult(result, expect);
      if (expect.host_saw_cancel) {
        for (let i = 0; i < 500 && sawCancel.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
        assert.ok(sawCancel.length > 0, 'the host tool never saw its cancellation token');
        sawCancel.length = 0;
      }
      if (expect.approval_requests) checkApprovalRequests(approvals.requests, expect.approval_requests);
      if (expect.tool_list_after) checkToolList(agent.listTools(), expect.tool_list_after);
      await checkDrain(scenario, at);
      await checkOAuthStats(scenario, at);
      await checkProvider(scenario, provider);
    }
  } finally {
    provider.stop();
    for (const p of at.oauthProcs) p.kill();
  }
}

/**
 * `test_model`: the users' test model on the scenario's wire, answering with the exchanges' `respond`
 * entries: scripted (`TestModel`), or by a function of the request (`FunctionModel`, sync or async)
 * answering request n with the n-th.
 */
function scenarioTestModel(scenario, useAsync) {
  const replies = scenario.exchanges.map(({ respond }) => ({
    content: respond.content,
    toolCalls: (respond.tool_calls || []).map((c) => ({ name: c.name, arguments: c.arguments, id: c.id })),
    usage: { inputTokens: respond.usage?.input_tokens ?? 0, outputTokens: respond.usage?.output_tokens ?? 0 },
  }));
  const options = { wire: scenario.wire || 'openai_chat', model: scenario.agent.model, stream: scenario.stream ?? false };
  if (scenario.test_model === 'script') return new TestModel(replies, options);
  const answer = (request) => {
    assert.equal(request.body.model, scenario.agent.model);
    assert.deepEqual(request.tools.map((t) => t.name), scenario.tools.map((t) => t.name));
    return replies[request.index - 1];
  };
  return new FunctionModel(useAsync ? async (request) => answer(request) : answer, options);
}

/** A file with `test_model` runs again on the users' test model, without a provider: the run must come
 *  out as it does against the loopback provider. */
async function runOnTheTestModel(file, mode) {
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8'));
  const approvals = scriptedApprovals(scenario);
  const agent = await buildAgent(scenario, undefined, approvals, undefined, scenarioTestModel(scenario, mode === 'stream'));
  const result = mode === 'stream' ? await viaStream(agent, scenario, scenario.input) : await agent.run(scenario.input);
  checkResult(result, scenario.expect);
}

/** Store URLs for the session scenarios: a fresh SQLite file, and PostgreSQL when scripts/test.sh started one
 *  (each run makes its own session in the shared database). */
function sessionStores() {
  const out = [['sqlite', () => `sqlite://${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-store-')), 'sessions.db')}`]];
  if (process.env.AMBIT_TEST_POSTGRES_URL) out.push(['postgres', () => process.env.AMBIT_TEST_POSTGRES_URL]);
  return out;
}

/** `want` (snake_case keys) matched against `got` (camelCase keys): each wanted key equal. */
function matchCamel(want, got, at) {
  for (const [k, v] of Object.entries(want)) {
    const key = k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    assert.deepEqual(got[key], v, `${at}.${key}`);
  }
}

/** A session step's `delivery` (the next one announced, within 60 s) and `task` (`taskResult` of its
 *  `task_id`), each matched key by key. */
async function checkTaskStep(sessions, deliveries, sid, want, at) {
  if (want.delivery) {
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${at}: no delivery within 60 s`)), 60000);
    });
    const next = await Promise.race([deliveries.next(), late]).finally(() => clearTimeout(timer));
    assert.ok(!next.done, `${at}: the deliveries ended`);
    assert.equal(next.value.sessionId, sid, `${at}: delivery.sessionId`);
    matchCamel(want.delivery, next.value, `${at}: delivery`);
  }
  if (want.task) matchCamel(want.task, await sessions.taskResult(sid, want.task.task_id), `${at}: task`);
}

/** A session step's input: its text, or its parts as the typed `Text`, `Image` and `File`. */
function sessionInput(input) {
  if (typeof input === 'string') return input;
  return input.map((p) => {
    if (p.type === 'text') return new Text(p.text);
    if (p.type === 'image') return Image.fromBytes(Buffer.from(p.data, 'base64'), p.media_type);
    if (p.type === 'image_url') return Image.fromUrl(p.url);
    return File.fromBytes(Buffer.from(p.data, 'base64'), p.media_type, p.filename);
  });
}

/** A `session` scenario: its steps (runs and resumes) in one session through `Sessions`, on the store at `url`. */
async function runSessionScenario(file, url) {
  const scenario = JSON.parse(fs.readFileSync(file, 'utf8'));
  const provider = await startProvider(file);
  const approvals = scriptedApprovals(scenario);
  const config = scenario.session.config || {};
  const open = () =>
    Sessions.open(url, { contextWindow: config.context_window, compactAt: config.compact_at, keepRecent: config.keep_recent });
  try {
    let sessions = await open();
    let agent = await buildAgent(scenario, provider.baseUrl, approvals);
    const sid = await sessions.create();
    let result = null;
    let open_;
    release = { opened: new Promise((resolve) => (open_ = resolve)) };
    const deliveries = sessions.deliveries();
    for (const [i, step] of scenario.session.steps.entries()) {
      const at = `step ${i + 1}`;
      const want = step.expect || {};
      if (step.release) {
        // The held tools finish; their results land in the session after the run that started them.
        open_();
        await checkTaskStep(sessions, deliveries, sid, want, at);
        continue;
      }
      result = null;
      try {
        if (step.resume) {
          // As another process would: a new store handle, a new agent.
          sessions = await open();
          agent = await buildAgent(scenario, provider.baseUrl, approvals);
          result = await sessions.resume(agent, sid, step.resume);
        } else {
          result = await sessions.run(agent, sid, sessionInput(step.input));
        }
      } catch (e) {
        if (e instanceof AwaitingApprovalError) {
          assert.ok(want.parked, `${at}: parked on ${e.request && e.request.tool}`);
          assert.equal(e.code, 'awaiting_approval');
          assert.equal(e.sessionId, sid, `${at}: sessionId`);
          const pending = await sessions.pending(sid);
          assert.ok(pending, `${at}: parked, but nothing is pending`);
          assert.equal(pending.tool, e.request.tool, `${at}: the pending tool`);
          checkApprovalRequests([pending], [want.parked]);
          continue;
        }
        if (!(e instanceof AmbitError) || !want.error) throw new Error(`${at} failed: ${e.message} (code ${e.code})`);
        assert.equal(e.code, want.error.code, `${at}: error code (message: ${e.message})`);
        if (want.error.message_contains) assert.ok(e.message.includes(want.error.message_contains), `${at}: ${e.message}`);
        continue;
      }
      assert.ok(!want.parked && !want.error, `${at}: expected ${JSON.stringify(want)}, got output ${JSON.stringify(result.output)}`);
      if ('output' in want) assert.equal(result.output, want.output, `${at}: output`);
      await checkTaskStep(sessions, deliveries, sid, want, at);
    }
    assert.ok(result, 'the last step did not finish a run');
    const { expect } = scenario;
    checkResult(result, expect);
    if (expect.approval_requests) checkApprovalRequests(approvals.requests, expect.approval_requests);
    if (expect.session_log) {
      assert.deepEqual((await sessions.entries(sid)).map((e) => e.kind), expect.session_log, 'session_log');
    }
  } catch (e) {
    throw new Error(`${e.message}; provider stderr: ${provider.stderr()}`);
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
    const name = f.replace(/\.json$/, '');
    const file = path.join(SCENARIOS_DIR, f);
    if ('session' in JSON.parse(fs.readFileSync(file, 'utf8'))) {
      // Through Sessions, which does not stream: once on each store.
      for (const [store, url] of sessionStores()) test(`${name} (session, ${store})`, () => runSessionScenario(file, url()));
      continue;
    }
    test(name, () => runScenario(file));
    test(`${name} (stream)`, () => runScenario(file, 'stream'));
    if ('test_model' in JSON.parse(fs.readFileSync(file, 'utf8'))) {
      test(`${name} (on the test model)`, () => runOnTheTestModel(file, 'run'));
      test(`${name} (on the test model, stream)`, () => runOnTheTestModel(file, 'stream'));
    }
    // A file with a `ledger` also runs on PostgreSQL when scripts/test.sh started one.
    if ('ledger' in JSON.parse(fs.readFileSync(file, 'utf8')) && process.env.AMBIT_TEST_POSTGRES_URL) {
      test(`${name} (ledger on postgres)`, () => runScenario(file, 'run', 'postgres'));
      test(`${name} (stream, ledger on postgres)`, () => runScenario(file, 'stream', 'postgres'));
    }
  }
});

describe('ledger timelines', () => {
  const timelines = fs
    .readdirSync(SCENARIOS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => path.join(SCENARIOS_DIR, f))
    .filter((file) => JSON.parse(fs.readFileSync(file, 'utf8')).ledger?.clock_ms != null);
  const stores = ['sqlite', ...(process.env.AMBIT_TEST_POSTGRES_URL ? ['postgres'] : [])];
  for (const store of stores) {
    // The negative control of the files with `ledger.clock_ms`: each passes as written (above), and fails
    // when any one of its `advance_clock` steps moves the clock a millisecond too little.
    test(`a timeline fails when the clock moves a millisecond too little (${store})`, async () => {
      assert.ok(timelines.length >= 3, `the ledger timelines: ${timelines}`);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-short-'));
      let tried = 0;
      for (const file of timelines) {
        const scenario = JSON.parse(fs.readFileSync(file, 'utf8'));
        for (const [n, step] of scenario.steps.entries()) {
          if (!('advance_clock' in step)) continue;
          const short = JSON.parse(fs.readFileSync(file, 'utf8'));
          short.steps[n].advance_clock -= 1;
          const shortFile = path.join(dir, `${n}-${path.basename(file)}`);
          fs.writeFileSync(shortFile, JSON.stringify(short));
          // What fails is the timeline: the provider saw another tool result, or the drain differs.
          await assert.rejects(runScenario(shortFile, 'run', store), /expected|drainDecision/, `${shortFile}`);
          tried += 1;
        }
      }
      assert.ok(tried >= 8, `${tried} shortened steps`);
    });
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

// Files with `telemetry`: run with OTLP export on, to a real OTLP/HTTP receiver (tests/otel/receiver.py,
// the official `opentelemetry-proto` decoding the exporter's protobuf), contents off then on; the checker
// every suite shares (tests/otel/check.py) asserts the span tree. Last in this file: export stays
// installed in the process once on.
describe('telemetry', () => {
  const { telemetry } = require('..');
  const files = fs
    .readdirSync(SCENARIOS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => path.join(SCENARIOS_DIR, f))
    .filter((file) => 'telemetry' in JSON.parse(fs.readFileSync(file, 'utf8')));
  const cache = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');
  const python = process.env.AMBIT_PY || path.join(cache, 'venv', 'bin', 'python');

  // One receiver for the block: export goes to one endpoint per process (a second is refused).
  let receiver;
  let url;
  before(async () => {
    receiver = spawn(python, [path.join(REPO, 'tests/otel/receiver.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    url = await new Promise((resolve, reject) => {
      readline.createInterface({ input: receiver.stdout }).once('line', resolve);
      receiver.once('exit', (code) => reject(new Error(`the receiver exited (${code})`)));
    });
  });
  after(() => receiver.kill());
  const enable = (recordContent) =>
    telemetry.enable({ endpoint: url, headers: { 'x-ambit-suite': 'node' }, recordContent, serviceName: 'ambit-node' });

  function check(url, file, content) {
    try {
      execFileSync(python, [path.join(REPO, 'tests/otel/check.py'), url, file, '--content', content ? 'on' : 'off'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      return null;
    } catch (e) {
      return String(e.stderr);
    }
  }

  test('enable refuses unknown options and bad endpoints with ConfigError', () => {
    assert.throws(() => telemetry.enable({ endpoint: 'http://localhost:4318', recordContents: true }), (e) => e instanceof ConfigError && /unknown option 'recordContents'/.test(e.message));
    assert.throws(() => telemetry.enable({ endpoint: 'localhost 4318' }), (e) => e instanceof ConfigError && /not a URL/.test(e.message));
    assert.throws(() => telemetry.enable({ endpoint: 'http://localhost:4318', recordContent: 'yes' }), ConfigError);
  });

  test('a tool that throws: its stack reaches the trace redacted, the model reads only the message', async () => {
    const { Agent, tool, FunctionModel, Credentials } = require('..');
    {
      function failDeep(token) {
        throw new Error(`vault refused token ${token}`);
      }
      const unlock = tool({ name: 'unlock', description: 'Unlocks the vault.', parameters: { type: 'object', properties: {} },
        credentials: ['vault'], run: async (_args, ctx) => failDeep(await ctx.credential('vault')) });
      const seen = [];
      const model = new FunctionModel((request) => {
        seen.push(JSON.stringify(request.messages));
        return request.index === 1 ? { toolCalls: [{ name: 'unlock', arguments: {} }] } : 'Done.';
      });
      const agent = new Agent({ model, tools: [unlock], credentials: new Credentials().value('vault', 's3cr3t-vault-token') });
      await fetch(`${url}/reset`, { method: 'POST' });
      enable(false);
      assert.equal((await agent.run('Unlock it.')).output, 'Done.');
      telemetry.flush();
      telemetry.disable();
      const spans = await (await fetch(`${url}/spans`)).json();
      const tools = spans.filter((s) => s.name === 'execute_tool unlock');
      assert.equal(tools.length, 1, JSON.stringify(spans.map((s) => s.name)));
      const events = tools[0].events.filter((e) => 'exception.stacktrace' in e.attributes);
      assert.equal(events.length, 1, JSON.stringify(tools[0].events));
      const trace = events[0].attributes['exception.stacktrace'];
      assert.match(trace, /failDeep/);
      assert.match(trace, /vault refused token \[credential:vault\]/);
      assert.equal(events[0].attributes['exception.message'], 'vault refused token [credential:vault]');
      assert.ok(!JSON.stringify(spans).includes('s3cr3t-vault-token'));
      // The model reads the message only: no stack frames.
      assert.match(seen[1], /vault refused token \[credential:vault\]/);
      assert.ok(!seen[1].includes('failDeep') && !seen.join('').includes('s3cr3t-vault-token'), seen[1]);
      // Negative control: the plain run before the tool's stack existed made no such event (a thrown
      // non-Error has no stack), so the assertion above can fail.
      const bare = tool({ name: 'unlock', description: 'Unlocks the vault.', parameters: { type: 'object', properties: {} },
        run: () => { throw 'a string, not an Error'; } });
      await fetch(`${url}/reset`, { method: 'POST' });
      enable(false);
      await new Agent({ model: new FunctionModel((r) => (r.index === 1 ? { toolCalls: [{ name: 'unlock', arguments: {} }] } : 'Done.')), tools: [bare] }).run('Unlock it.');
      telemetry.flush();
      telemetry.disable();
      const again = (await (await fetch(`${url}/spans`)).json()).filter((s) => s.name === 'execute_tool unlock');
      assert.equal(again.length, 1);
      assert.equal(again[0].events.filter((e) => 'exception.stacktrace' in e.attributes).length, 0);
    }
  });

  for (const file of files) {
    test(`${path.basename(file, '.json')}: the exported span tree`, async () => {
      {
        for (const content of [false, true]) {
          enable(content);
          await runScenario(file);
          telemetry.flush();
          assert.equal(check(url, file, content), null);
        }
        // Negative control: the run with contents recorded them, so the checker's `off` fails on it.
        assert.match(check(url, file, false) ?? '', /record_content is off and span/);
        // Off: a run makes no span (the latest trace is still the one with contents).
        telemetry.disable();
        await runScenario(file);
        assert.equal(check(url, file, true), null);
      }
    });
  }
});
