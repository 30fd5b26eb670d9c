'use strict';
// Sessions from Node, and parked approvals across processes and languages: a run parked by Python is
// resumed here, and a run parked here is resumed by Python, on SQLite and (when scripts/test.sh started
// it) PostgreSQL. The Python side runs in the cached virtualenv the Python suite built.

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn, execFileSync } = require('node:child_process');

const { Agent, OpenAIChat, tool, Sessions, AwaitingApprovalError, SESSION_TOOLS } = require('..');
const native = require('../native.js');

const { CACHE, providerPath } = require('./support.js');


function pythonPath() {
  const found = [process.env.AMBIT_PY, path.join(CACHE, 'venv', 'bin', 'python')].filter(Boolean).find((p) => fs.existsSync(p));
  assert.ok(found, 'the Python virtualenv is not built: run bash scripts/test-python.sh first');
  return found;
}

function startProvider(name, exchanges) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-sessions-')), `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ name, exchanges }));
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

/** Store URLs: SQLite always, PostgreSQL when the test script started one. */
function stores() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-store-'));
  const out = [['sqlite', `sqlite://${path.join(dir, 'sessions.db')}`]];
  if (process.env.AMBIT_TEST_POSTGRES_URL) out.push(['postgres', process.env.AMBIT_TEST_POSTGRES_URL]);
  return out;
}

const sendEmail = tool({
  name: 'send_email',
  description: 'Send the drafted email.',
  parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
  level: 'read',
  requiresApproval: true,
  run: async ({ to }) => `sent to ${to}`,
});

function emailAgent(baseUrl, answer) {
  return new Agent({
    model: new OpenAIChat('m', { baseUrl, maxRetries: 0 }),
    tools: [sendEmail],
    policy: { level: 'read', approvals: async () => answer },
  });
}

// The same agent in Python: its handler answers `answer` (a Python expression).
const PY_AGENT = (answer) => `
import asyncio, sys, ambit

@ambit.tool(level="read", requires_approval=True)
def send_email(to: str) -> str:
    """Send the drafted email."""
    return f"sent to {to}"

def agent(base_url):
    return ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), tools=[send_email],
                       policy=ambit.Policy(level="read", approvals=lambda r: ${answer}))
`;

function python(code, args) {
  return execFileSync(pythonPath(), ['-c', code, ...args], { encoding: 'utf8' }).trim();
}

const PARK_EXCHANGES = [
  { respond: { tool_calls: [{ id: 'a', name: 'send_email', arguments: { to: 'ops@example.com' } }] } },
  {
    expect: { messages_count: 3, messages_tail: [{ role: 'tool', tool_call_id: 'a', content: 'sent to ops@example.com' }] },
    respond: { content: 'Sent.' },
  },
];

describe('sessions', () => {
  for (const [kind, url] of stores()) {
    test(`runs continue the log and compaction keeps it searchable (${kind})`, async () => {
      const p = await startProvider('node_sessions', [
        { expect: { messages_count: 1 }, respond: { content: 'Noted.' } },
        { expect: { messages_count: 3 }, respond: { content: 'Deployed.' } },
        { expect: { messages_count: 2, tool_names: [] }, respond: { content: 'The token location was given.' } },
        { expect: { messages_count: 4 }, respond: { content: 'In vault/ops.' } },
      ]);
      try {
        const sessions = await Sessions.open(url, { keepRecent: 1 });
        const agent = new Agent({ model: new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 }), builtins: SESSION_TOOLS });
        const sid = await sessions.create();
        await sessions.run(agent, sid, 'The auth token is in vault/ops.');
        await sessions.run(agent, sid, 'Deploy now.');
        assert.equal(await sessions.compact(agent, sid), true);
        const r = await sessions.run(agent, sid, 'Where was the token?');
        assert.equal(r.output, 'In vault/ops.');
        assert.ok((await sessions.search(sid, 'VAULT')).startsWith('#1 user: The auth token is in vault/ops.'));
        const kinds = (await sessions.entries(sid)).map((e) => e.kind);
        assert.deepEqual(kinds.slice(0, 6), ['message', 'message', 'message', 'message', 'boundary', 'summary']);
      } finally {
        p.stop();
      }
    });

    test(`a run parked by Python is resumed by Node (${kind})`, async () => {
      const p = await startProvider('py_parks', PARK_EXCHANGES);
      try {
        const sid = python(
          `${PY_AGENT('ambit.Later()')}
async def main(url, base_url):
    sessions = await ambit.Sessions.open(url)
    sid = await sessions.create()
    try:
        await sessions.run(agent(base_url), sid, "Send it.")
    except ambit.AwaitingApproval as e:
        assert e.request["tool"] == "send_email", e.request
        print(sid)
asyncio.run(main(sys.argv[1], sys.argv[2]))`,
          [url, p.baseUrl],
        );
        assert.match(sid, /^[0-9a-f]{20}$/);
        const sessions = await Sessions.open(url);
        assert.equal((await sessions.pending(sid)).tool, 'send_email');
        const r = await sessions.resume(emailAgent(p.baseUrl, { decision: 'deny', reason: 'unused' }), sid, { decision: 'approve' });
        assert.equal(r.output, 'Sent.');
        assert.equal(await sessions.pending(sid), null);
      } finally {
        p.stop();
      }
    });

    test(`a sub-agent tree parked by Python is followed up by Node (${kind})`, async () => {
      // The run state carries the sub-agent tree (SPEC §8b): Python spawns a sub-agent and parks; Node
      // resumes with an agent of its own, which follows the sub-agent up on its own conversation.
      const p = await startProvider('py_tree_parks', [
        { respond: { tool_calls: [{ id: 's', name: 'agent_spawn', arguments: { prompt: 'Where is the report?', permission: 'read' } }] } },
        { expect: { messages_count: 1 }, respond: { content: 'In /srv/report.' } },
        { respond: { tool_calls: [{ id: 'a', name: 'send_email', arguments: { to: 'ops@example.com' } }] } },
        { respond: { tool_calls: [{ id: 'f', name: 'agent_followup', arguments: { id: '4cf40c4e8395', prompt: 'And the draft?' } }] } },
        {
          expect: {
            messages_count: 3,
            messages_tail: [
              { role: 'user', content: 'Where is the report?' },
              { role: 'assistant', content: 'In /srv/report.' },
              { role: 'user', content: 'And the draft?' },
            ],
          },
          respond: { content: 'In /srv/draft.' },
        },
        { respond: { content: 'Done.' } },
      ]);
      try {
        const sid = python(
          `
import asyncio, sys, ambit

@ambit.tool(level="read", requires_approval=True)
def send_email(to: str) -> str:
    """Send the drafted email."""
    return f"sent to {to}"

async def main(url, base_url):
    sessions = await ambit.Sessions.open(url)
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), tools=[send_email],
                        subagents=True, policy=ambit.Policy(level="read", approvals=lambda r: ambit.Later()))
    sid = await sessions.create()
    try:
        await sessions.run(agent, sid, "Find the report, then mail ops.")
    except ambit.AwaitingApproval:
        print(sid)
asyncio.run(main(sys.argv[1], sys.argv[2]))`,
          [url, p.baseUrl],
        );
        assert.match(sid, /^[0-9a-f]{20}$/);
        const sessions = await Sessions.open(url);
        const agent = new Agent({
          model: new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 }),
          tools: [sendEmail],
          subagents: true,
          policy: { level: 'read', approvals: async () => ({ decision: 'deny', reason: 'unused' }) },
        });
        const r = await sessions.resume(agent, sid, { decision: 'approve' });
        assert.equal(r.output, 'Done.');
        const followed = (await sessions.entries(sid)).find((e) => e.message && e.message.call_id === 'f');
        assert.ok(followed && !followed.message.is_error, JSON.stringify(followed));
        assert.ok(followed.message.content.endsWith('In /srv/draft.'), followed.message.content);
      } finally {
        p.stop();
      }
    });

    test(`a run parked by Node is resumed by Python (${kind})`, async () => {
      const p = await startProvider('node_parks', PARK_EXCHANGES);
      try {
        const sessions = await Sessions.open(url);
        const sid = await sessions.create();
        await assert.rejects(sessions.run(emailAgent(p.baseUrl, { decision: 'later' }), sid, 'Send it.'), (e) => {
          assert.ok(e instanceof AwaitingApprovalError, String(e));
          assert.equal(e.code, 'awaiting_approval');
          assert.equal(e.request.tool, 'send_email');
          return true;
        });
        const out = python(
          `${PY_AGENT('ambit.Deny("unused")')}
async def main(url, base_url, sid):
    sessions = await ambit.Sessions.open(url)
    result = await sessions.resume(agent(base_url), sid, ambit.Approve())
    print(result.output)
asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))`,
          [url, p.baseUrl, sid],
        );
        assert.equal(out, 'Sent.');
        const log = await sessions.entries(sid);
        assert.deepEqual(
          log.map((e) => e.message && e.message.role),
          ['user', 'assistant', 'tool', 'assistant'],
        );
        assert.equal(log[2].message.content, 'sent to ops@example.com');
      } finally {
        p.stop();
      }
    });
  }
});

describe('durable runs', () => {
  for (const [kind, url] of stores()) {
    test(`a second run on a running session is refused with session_busy (${kind})`, async () => {
      const p = await startProvider('node_busy', [
        { respond: { tool_calls: [{ id: 'w', name: 'wait', arguments: {} }] } },
        { respond: { content: 'first' } },
        { respond: { content: 'second' } },
      ]);
      try {
        let entered;
        const inside = new Promise((resolve) => { entered = resolve; });
        let release;
        const released = new Promise((resolve) => { release = resolve; });
        const wait = tool({
          name: 'wait',
          description: 'Wait until released.',
          parameters: { type: 'object', properties: {} },
          run: async () => {
            entered();
            await released;
            return 'done';
          },
        });
        const agent = new Agent({ model: new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 }), tools: [wait] });
        const sessions = await Sessions.open(url);
        const sid = await sessions.create();
        const first = sessions.run(agent, sid, 'one');
        await inside;
        await assert.rejects(sessions.run(agent, sid, 'two'), (e) => {
          assert.equal(e.code, 'session_busy', String(e));
          return true;
        });
        // Asked to wait (busyWaitMs), a run waits for the session up to its bound, then is refused saying so.
        const hasty = await Sessions.open(url, { busyWaitMs: 200, leaseMs: 2000 });
        await assert.rejects(hasty.run(agent, sid, 'two'), (e) => {
          assert.equal(e.code, 'session_busy', String(e));
          assert.match(e.message, /waited/);
          return true;
        });
        // With room to wait, it gets the session once the first run lets it go.
        const patient = await Sessions.open(url, { busyWaitMs: 60000 });
        const second = patient.run(agent, sid, 'two');
        release();
        assert.equal((await first).output, 'first');
        assert.equal((await second).output, 'second');
      } finally {
        p.stop();
      }
    });

    test(`the lease and the busy wait are checked by the core (${kind})`, async () => {
      for (const [options, named] of [[{ leaseMs: 1 }, 'lease_ms'], [{ busyWaitMs: 3600001 }, 'busy_wait_ms']]) {
        await assert.rejects(Sessions.open(url, options), (e) => {
          assert.equal(e.code, 'invalid_argument', String(e));
          assert.ok(e.message.includes(named), e.message);
          return true;
        });
      }
    });

    test(`a handle whose clock passed the lease takes over a stuck run (${kind})`, async () => {
      // Sessions on the manual clock of the test hook: while a run holds the session (its tool waits), a
      // handle whose clock has not passed the lease is refused with session_busy (the negative control);
      // the same handle, its clock moved an hour on, takes the session over (as another process would a
      // dead run's), and the first run, once its tool returns, finds it lost without asking the model again.
      const p = await startProvider('node_take_over', [
        { respond: { tool_calls: [{ id: 'w', name: 'wait', arguments: {} }] } },
        { expect: { messages_tail: [{ role: 'user', content: 'two' }] }, respond: { content: 'second' } },
      ]);
      try {
        let entered;
        const inside = new Promise((resolve) => { entered = resolve; });
        let release;
        const released = new Promise((resolve) => { release = resolve; });
        const wait = tool({
          name: 'wait',
          description: 'Wait until released.',
          parameters: { type: 'object', properties: {} },
          run: async () => {
            entered();
            await released;
            return 'done';
          },
        });
        const agent = new Agent({ model: new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 }), tools: [wait] });
        const live = await Sessions.open(url);
        const sid = await live.create();
        const first = live.run(agent, sid, 'one');
        first.catch(() => {});
        await inside;
        // A clock at the system's time: the live run's lease (30 s, renewed every 10 s) holds.
        const clock = new native.TestingClock(Date.now());
        const later = new Sessions(await native._testingOpenSessions(url, '{}', clock));
        await assert.rejects(later.run(agent, sid, 'two'), (e) => e.code === 'session_busy');
        clock.advance(3_600_000);
        assert.equal((await later.run(agent, sid, 'two')).output, 'second');
        release();
        await assert.rejects(first, (e) => e.code === 'session_busy' && /taken over by another run/.test(e.message));
        const state = await (await fetch(p.baseUrl.replace(/\/v1$/, '/__ambit/state'))).json();
        assert.equal(state.served, 2, JSON.stringify(state.mismatches));
        assert.deepEqual(state.mismatches, []);
      } finally {
        p.stop();
      }
    });

    test(`two resumes of one parked approval run the tool once (${kind})`, async () => {
      const p = await startProvider('node_resume_once', PARK_EXCHANGES);
      try {
        const sent = [];
        const counted = tool({
          name: 'send_email',
          description: 'Send the drafted email.',
          parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
          level: 'read',
          requiresApproval: true,
          run: async ({ to }) => {
            sent.push(to);
            return `sent to ${to}`;
          },
        });
        const agent = new Agent({
          model: new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 }),
          tools: [counted],
          policy: { level: 'read', approvals: async () => ({ decision: 'later' }) },
        });
        const sessions = await Sessions.open(url);
        const sid = await sessions.create();
        await assert.rejects(sessions.run(agent, sid, 'Send it.'), AwaitingApprovalError);
        const outcomes = await Promise.allSettled([
          sessions.resume(agent, sid, { decision: 'approve' }),
          sessions.resume(agent, sid, { decision: 'approve' }),
        ]);
        const done = outcomes.filter((o) => o.status === 'fulfilled');
        const refused = outcomes.filter((o) => o.status === 'rejected');
        assert.equal(done.length, 1, JSON.stringify(outcomes));
        assert.equal(refused.length, 1);
        assert.equal(refused[0].reason.code, 'session_not_parked', String(refused[0].reason));
        assert.deepEqual(sent, ['ops@example.com']);
        const results = (await sessions.entries(sid)).filter((e) => e.message && e.message.role === 'tool');
        assert.deepEqual(results.map((e) => e.message.content), ['sent to ops@example.com']);
      } finally {
        p.stop();
      }
    });

    test('idempotent is a tool option, checked for its type', () => {
      const base = { name: 't', parameters: { type: 'object', properties: {} }, run: () => 'x' };
      assert.equal(tool({ ...base, idempotent: true }).idempotent, true);
      assert.throws(() => tool({ ...base, idempotent: 'yes' }), /idempotent must be a boolean/);
    });
  }
});

describe('the context window', () => {
  const cases = [
    ['gpt-4', undefined, undefined, 8192],
    ['my-local-model', undefined, undefined, 32768],
    ['gpt-4', 50000, undefined, 50000],
    ['gpt-4', 50000, 7000, 7000],
  ];
  for (const [name, modelWindow, storeWindow, expected] of cases) {
    test(`comes from the model unless the store names one (${name}, ${modelWindow}, ${storeWindow})`, async () => {
      const p = await startProvider('node_window', [
        { respond: { tool_calls: [{ id: 'c', name: 'context_check', arguments: {} }] } },
        { respond: { content: 'ok' } },
      ]);
      try {
        const [[, url]] = stores();
        const sessions = await Sessions.open(url, { contextWindow: storeWindow });
        const model = new OpenAIChat(name, { baseUrl: p.baseUrl, maxRetries: 0, contextWindow: modelWindow });
        const agent = new Agent({ model, builtins: SESSION_TOOLS });
        const sid = await sessions.create();
        const r = await sessions.run(agent, sid, 'how full?');
        assert.ok(r.toolCalls[0].result.includes(` of ${expected} tokens`), r.toolCalls[0].result);
      } finally {
        p.stop();
      }
    });
  }
  test('a window that is not a number is refused', () => {
    assert.throws(() => new OpenAIChat('m', { contextWindow: 'big' }), /contextWindow must be a number/);
  });
});
