'use strict';
// Routines from Node (SPEC §13): definitions with revisions credited to actors, every validation error
// as InvalidRoutineError naming its field (camelCase), and a Runner whose agent factory is a JS function
// (plain or async), on SQLite and (when scripts/test.sh started it) PostgreSQL. The core's own suite runs
// the multi-process guarantees on both stores.

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');

const {
  Agent,
  OpenAIChat,
  Sessions,
  Routines,
  Runner,
  RunContext,
  InvalidRoutineError,
  RoutineNotFoundError,
  AwaitingApprovalError,
} = require('..');

const { CACHE, providerPath } = require('./support.js');


function startProvider(name, exchanges) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-routines-')), `${name}.json`);
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-routines-store-'));
  const out = [['sqlite', `sqlite://${path.join(dir, 'routines.db')}`]];
  if (process.env.AMBIT_TEST_POSTGRES_URL) out.push(['postgres', process.env.AMBIT_TEST_POSTGRES_URL]);
  return out;
}

/** An agent name of this test's own, so the shared PostgreSQL database serves. */
const fresh = () => `node-${crypto.randomBytes(4).toString('hex')}`;

for (const [kind, url] of stores()) {
  describe(`routines on ${kind}`, () => {
    test('definitions, revisions and every validation error by field name', async () => {
      const routines = await Routines.open(url);
      const agent = fresh();
      const r = await routines.create(
        { agent, instructions: 'Chase POs.', intervalSeconds: 1800, title: 'POs', dailyCap: 5 },
        { actor: 'alice' },
      );
      assert.equal(r.revision, 1);
      assert.equal(r.catchUp, 1);
      assert.equal(r.intervalSeconds, 1800);
      assert.equal(r.nextSlot, r.createdAt, 'an interval routine first fires on the next tick');
      const r2 = await routines.update(r.id, { instructions: 'Chase the five oldest POs.', title: null }, { actor: 'bob' });
      assert.equal(r2.revision, 2);
      assert.equal(r2.title, null);
      assert.equal(r2.nextSlot, r.nextSlot, 'rewording keeps the slot');
      const r3 = await routines.update(r.id, { cronExpression: '0 9 * * 1-5', timezone: 'Europe/Paris' }, { actor: 'carol' });
      assert.equal(r3.intervalSeconds, null);
      assert.notEqual(r3.nextSlot, r.nextSlot, 'a schedule change reschedules');
      const got = await routines.get(r.id);
      assert.deepEqual(got.revisions.map((v) => [v.revision, v.actor]), [[1, 'alice'], [2, 'bob'], [3, 'carol']]);
      assert.equal(got.revisions[0].definition.instructions, 'Chase POs.');
      assert.deepEqual((await routines.list({ agent })).map((x) => x.id), [r.id]);

      const base = { agent, instructions: 'go', intervalSeconds: 60 };
      const window = { weekdays: ['mon'], start: '17:00', end: '09:00', timezone: 'UTC' };
      const cases = [
        [{ ...base, intervalSeconds: null, cronExpression: '61 * * * *' }, 'cronExpression'],
        [{ ...base, intervalSeconds: null, cronExpression: '0 9 * * *', timezone: 'Mars/Base' }, 'timezone'],
        [{ ...base, intervalSeconds: 0 }, 'intervalSeconds'],
        [{ ...base, activeWindow: window }, 'activeWindow'],
        [{ ...base, dailyCap: -1 }, 'dailyCap'],
        [{ ...base, parallelLimit: 0 }, 'parallelLimit'],
        [{ ...base, catchUp: 0 }, 'catchUp'],
        [{ ...base, colour: 'red' }, 'colour'],
      ];
      for (const [definition, field] of cases) {
        await assert.rejects(routines.create(definition, { actor: 'alice' }), (e) => {
          assert.ok(e instanceof InvalidRoutineError, `${field}: ${e}`);
          assert.equal(e.code, 'invalid_argument');
          assert.equal(e.field, field, e.message);
          return true;
        });
      }
      await assert.rejects(routines.update(r.id, { agent: 'someone-else' }, { actor: 'bob' }), (e) => e.field === 'agent');
      await assert.rejects(routines.create('not an object', { actor: 'alice' }), InvalidRoutineError);
      await assert.rejects(routines.create(base, {}), TypeError, 'the actor is required');

      await routines.delete(r.id, { actor: 'dave' });
      await assert.rejects(routines.get(r.id), RoutineNotFoundError);
      assert.deepEqual((await routines.revisions(r.id)).map((v) => v.change), ['create', 'update', 'update', 'delete']);
    });

    test('a runner runs a JS agent (sync and async factories) and records its outcome', async () => {
      const p = await startProvider('node_routine', [
        {
          expect: { tool_names: ['report_outcome', 'list_my_routines', 'list_my_outcomes'] },
          respond: {
            tool_calls: [{ id: 'r', name: 'report_outcome', arguments: { status: 'nothing_to_do', summary: 'No PO lacked tracking.' } }],
          },
        },
        { respond: { content: 'Done.' } },
        { respond: { content: 'Second.' } },
      ]);
      try {
        const routines = await Routines.open(url);
        const sessions = await Sessions.open(url);
        const name = fresh();
        const other = fresh();
        const r = await routines.create({ agent: name, instructions: 'Chase POs.', intervalSeconds: 3600 }, { actor: 'alice' });
        const seen = [];
        const model = new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 });
        const runner = new Runner(routines, sessions, {
          leaseMs: 30_000,
          agents: {
            [name]: (ctx) => {
              seen.push(ctx);
              return new Agent({ model, routine: ctx });
            },
            [other]: async (ctx) => new Agent({ model, routine: ctx }),
          },
        });
        const report = await runner.tick(r.createdAt);
        assert.deepEqual(report.started.map((x) => x.routineId), [r.id]);
        await runner.waitIdle();
        assert.ok(seen[0] instanceof RunContext);
        assert.equal(seen[0].routine.id, r.id);
        assert.equal(seen[0].run.slotAt, r.createdAt);
        const [run] = await routines.runs({ routineId: r.id });
        assert.equal(run.state, 'finished');
        assert.equal(run.outcome, 'nothing_to_do');
        assert.equal(run.summary, 'No PO lacked tracking.');
        assert.equal(run.runner, runner.id);
        const entries = await sessions.entries(run.sessionId);
        assert.equal(entries[entries.length - 1].message.content, 'Done.', 'the run is an ordinary session run');
        assert.deepEqual((await runner.tick(r.createdAt)).started, [], 'the slot ran once');

        // An async factory.
        const r2 = await routines.create({ agent: other, instructions: 'Again.', intervalSeconds: 3600 }, { actor: 'alice' });
        await runner.tick(r2.createdAt);
        await runner.waitIdle();
        const [run2] = await routines.runs({ routineId: r2.id });
        assert.deepEqual([run2.state, run2.outcome], ['finished', 'unknown'], 'a run that never reports is unknown');
      } finally {
        p.stop();
      }
    });

    test('a factory that throws or returns no Agent ends the run as an error, naming why', async () => {
      const routines = await Routines.open(url);
      const sessions = await Sessions.open(url);
      const [a, b] = [fresh(), fresh()];
      const runner = new Runner(routines, sessions, {
        agents: {
          [a]: () => {
            throw new Error('no model configured');
          },
          [b]: () => 'not an agent',
        },
      });
      const ra = await routines.create({ agent: a, instructions: 'x', intervalSeconds: 60 }, { actor: 't' });
      const rb = await routines.create({ agent: b, instructions: 'x', intervalSeconds: 60 }, { actor: 't' });
      await runner.tick(Math.max(ra.createdAt, rb.createdAt));
      await runner.waitIdle();
      const [runA] = await routines.runs({ routineId: ra.id });
      const [runB] = await routines.runs({ routineId: rb.id });
      assert.equal(runA.outcome, 'error');
      assert.match(runA.summary, /no model configured/);
      assert.equal(runB.outcome, 'error');
      assert.match(runB.summary, /not an Agent/);
    });

    test('a parked run resumed through Sessions.resume leaves parked; its record is finished', async () => {
      const p = await startProvider('node_routine_park', [
        { respond: { tool_calls: [{ id: 'e', name: 'escalate_to_human', arguments: { question: 'Go ahead?' } }] } },
        { respond: { content: 'Went ahead.' } },
      ]);
      try {
        const routines = await Routines.open(url);
        const sessions = await Sessions.open(url);
        const name = fresh();
        const model = new OpenAIChat('m', { baseUrl: p.baseUrl, maxRetries: 0 });
        const build = (ctx) =>
          new Agent({
            model,
            routine: ctx,
            builtins: ['escalate_to_human'],
            policy: { level: 'unrestricted', approvals: () => ({ decision: 'later' }) },
          });
        const runner = new Runner(routines, sessions, { agents: { [name]: build } });
        const r = await routines.create({ agent: name, instructions: 'Ask first.', intervalSeconds: 3600 }, { actor: 'a' });
        await runner.tick(r.createdAt);
        await runner.waitIdle();
        const [parked] = await routines.runs({ routineId: r.id });
        assert.equal(parked.state, 'parked');
        assert.ok(await sessions.pending(parked.sessionId));
        // The person answers, through the session API (as any process would).
        const resumed = await sessions.resume(
          new Agent({ model, builtins: ['escalate_to_human'], policy: { level: 'unrestricted' } }),
          parked.sessionId,
          { decision: 'approve' },
        );
        assert.equal(resumed.output, 'Went ahead.');
        const report = await runner.tick(r.createdAt + 1);
        assert.deepEqual(report.resumed.map((x) => x.id), [parked.id]);
        const after = await routines.run(parked.id);
        assert.equal(after.state, 'finished');
        assert.equal(after.outcome, 'unknown');
      } finally {
        p.stop();
      }
    });
  });
}

test('runner options are checked by name', async () => {
  const [[, url]] = stores();
  const routines = await Routines.open(url);
  const sessions = await Sessions.open(url);
  assert.throws(() => new Runner(routines, sessions, { agents: { x: 'nope' } }), TypeError);
  assert.throws(() => new Runner({}, sessions, { agents: {} }), TypeError);
  assert.throws(
    () => new Runner(routines, sessions, { agents: {}, leaseMs: -5 }),
    (e) => e instanceof InvalidRoutineError && e.field === 'leaseMs',
  );
  assert.throws(
    () => new Runner(routines, sessions, { agents: {}, id: 'bad id\n' }),
    (e) => e instanceof InvalidRoutineError && e.field === 'id',
  );
  await assert.rejects(Routines.open('mysql://x'), (e) => e instanceof InvalidRoutineError && e.field === 'url');
  void AwaitingApprovalError;
});
