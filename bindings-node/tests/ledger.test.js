'use strict';
// The work ledger from Node: claim -> record -> list, an atomic batch rejected whole, and (on the manual
// clock of the test hook, on SQLite and PostgreSQL) reportBacklog and drainDecision over time.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const crypto = require('node:crypto');

const {
  Agent, OpenAIChat, Ledger, RoutineLedger, AmbitError, ConfigError, InvalidBatchError, InvalidLedgerArgumentError,
  NotClaimedError, ScopePinnedError, LedgerError,
} = require('..');
const native = require('../native.js');

const url = () => `sqlite://${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-ledger-')), 'ledger.db')}`;

test('claim, record and list', async () => {
  const ledger = await Ledger.open(url());
  const claim = await ledger.claim('po.tracking', ['PO-1', { subjectKey: 'PO-2', fingerprint: 'none' }, 'PO-3'], {
    limit: 2,
    runId: 'run-1',
  });
  assert.deepEqual(claim.granted.map((c) => [c.subjectKey, c.grantReason]), [['PO-1', 'fresh'], ['PO-2', 'fresh']]);
  assert.equal(claim.get('PO-3').skipReason, 'over_limit');
  assert.equal((await ledger.claim('po.tracking', ['PO-1'], { limit: 1, runId: 'run-2' })).get('PO-1').skipReason, 'in_flight');

  const done = await ledger.record(
    'po.tracking',
    [{ subjectKey: 'PO-1', outcome: 'empty', token: claim.get('PO-1').token }, { subjectKey: 'PO-2', outcome: 'productive' }],
    { runId: 'run-1' },
  );
  assert.deepEqual(done.recorded.map((r) => [r.subjectKey, r.misses, r.escalate]), [['PO-1', 1, false], ['PO-2', 0, false]]);

  const rows = await ledger.list({ scope: 'po.tracking' });
  assert.deepEqual(rows.map((r) => [r.subjectKey, r.state, r.lastGrantReason]), [
    ['PO-1', 'cooling_down', 'fresh'],
    ['PO-2', 'cooling_down', 'fresh'],
  ]);
  assert.deepEqual(await ledger.list({ state: 'eligible' }), []);
  assert.deepEqual(await ledger.grantReasonCounts('po.tracking'), { fresh: 2, cooldownExpired: 0, fingerprintChanged: 0 });
  const report = await ledger.reportBacklog('rt', ['PO-1', 'PO-3'], 1, { limits: { parallelLimit: 3 } });
  assert.equal(report.workable, 2, 'the routine has no scope yet: everything is workable');
});

test('a bad batch is rejected whole, with typed errors', async () => {
  const ledger = await Ledger.open(url());
  await ledger.claim('s', ['A', 'B'], { limit: 2, runId: 'run-1' });
  const good = { subjectKey: 'A', outcome: 'empty' };
  const cases = [
    [[good, { subjectKey: 'B', outcome: 'done' }], InvalidBatchError, 'ledger_invalid_batch'],
    [[good, { outcome: 'empty' }], InvalidBatchError, 'ledger_invalid_batch'],
    [[good, { subjectKey: 'A', outcome: 'failed' }], InvalidBatchError, 'ledger_invalid_batch'],
    [[good, { subjectKey: 'C', outcome: 'empty' }], NotClaimedError, 'ledger_not_claimed'],
  ];
  for (const [batch, Cls, code] of cases) {
    await assert.rejects(ledger.record('s', batch, { runId: 'run-1' }), (e) => {
      assert.ok(e instanceof Cls && e instanceof LedgerError && e instanceof AmbitError, String(e));
      assert.equal(e.code, code);
      return true;
    });
  }
  const rows = await ledger.list({ scope: 's' });
  assert.deepEqual(rows.map((r) => [r.subjectKey, r.state, r.attempts, r.misses]), [
    ['A', 'in_flight', 1, 0],
    ['B', 'in_flight', 1, 0],
  ]);
});

test('scope pinning and bad URLs', async () => {
  const ledger = await Ledger.open(url());
  await ledger.claim('a', ['X'], { limit: 1, routineId: 'rt' });
  await assert.rejects(ledger.claim('b', ['X'], { limit: 1, routineId: 'rt' }), (e) => {
    assert.ok(e instanceof ScopePinnedError);
    assert.equal(e.pinnedScope, 'a');
    return true;
  });
  await assert.rejects(Ledger.open('mysql://nope'), (e) => e instanceof LedgerError && e.code === 'ledger_invalid_argument');
});

test('an agent gets the ledger tools of a routine run', async () => {
  const ledger = await Ledger.open(url());
  const routine = ledger.forRoutine('po.tracking', { runId: 'run-1', routineId: 'po-tracker', limit: 3 });
  assert.ok(routine instanceof RoutineLedger);
  assert.deepEqual(routine.toolNames, ['claim_work', 'record_work', 'list_work_ledger', 'report_backlog']);
  assert.deepEqual([routine.scope, routine.routineId, routine.runId], ['po.tracking', 'po-tracker', 'run-1']);
  const model = new OpenAIChat('gpt-4.1');
  const agent = new Agent({ model, ledger: routine });
  assert.deepEqual(agent.listTools().map((t) => t.name), routine.toolNames);
  assert.throws(() => new Agent({ model, ledger }), /forRoutine/);
  assert.throws(() => ledger.forRoutine('po.tracking', {}), TypeError);
  assert.throws(
    () => ledger.forRoutine('po.tracking', { runId: 'r', limits: { parallelLimit: -1 } }),
    (e) => e instanceof LedgerError && e.code === 'ledger_invalid_argument',
  );
});

/** 2026-01-01T00:00:00Z, and an hour, in milliseconds. */
const T0 = 1_767_225_600_000;
const HOUR = 3_600_000;
const STORES = ['sqlite', ...(process.env.AMBIT_TEST_POSTGRES_URL ? ['postgres'] : [])];

/** A ledger on a manual clock at T0 (the test hook), and the suffix its keys get on that store. */
async function clocked(store) {
  const clock = new native.TestingClock(T0);
  const [at, sfx] = store === 'sqlite' ? [url(), ''] : [process.env.AMBIT_TEST_POSTGRES_URL, `-${crypto.randomUUID().slice(0, 18)}`];
  return { ledger: new Ledger(await native._testingOpenLedger(at, clock)), clock, sfx };
}

for (const store of STORES) {
  test(`reportBacklog and drainDecision over time (${store})`, async () => {
    // The backlog counts what is workable at the clock's time (a cooldown ends exactly on time), the extra
    // runs follow the routine's limits, and the drain stops for each reason: reportStale a millisecond
    // after the report is an hour old (exactly an hour: still on).
    const { ledger, clock, sfx } = await clocked(store);
    const rt = `po-tracker${sfx}`;
    const scope = `po${sfx}`;
    const run = (n) => `run-${n}${sfx}`;
    const queue = [0, 1, 2, 3, 4, 5].map((i) => `PO-${i}`);
    let report = await ledger.reportBacklog(rt, queue, 2, { limits: { parallelLimit: 8 }, runId: run(0) });
    assert.deepEqual(report, { routineId: rt, scope: null, workable: 6, extraRuns: 3 });
    const claim = await ledger.claim(scope, queue.slice(0, 2), { limit: 2, runId: run(1), routineId: rt });
    assert.deepEqual(claim.candidates.map((c) => c.grantReason), ['fresh', 'fresh']);
    await ledger.record(scope, [{ subjectKey: 'PO-0', outcome: 'empty' }], { runId: run(1) });
    report = await ledger.reportBacklog(rt, queue, 1, { limits: { parallelLimit: 3 }, runId: run(1) });
    assert.deepEqual([report.workable, report.extraRuns, report.scope], [4, 2, scope]);
    assert.deepEqual(await ledger.drainDecision(rt, run(1)), { stop: null, startRuns: 1 });
    assert.deepEqual(await ledger.drainDecision(rt, run(1), { limits: { dailyCap: 5, startedToday: 5 } }), { stop: null, startRuns: 0 });
    clock.advance(HOUR);
    assert.equal((await ledger.drainDecision(rt, run(1))).stop, null, 'exactly an hour old: still on');
    clock.advance(1);
    assert.deepEqual(await ledger.drainDecision(rt, run(1)), { stop: 'report_stale', startRuns: 0 });
    assert.equal((await ledger.drainDecision(rt, run(2))).stop, 'queue_empty');
    await ledger.claim(scope, ['PO-5'], { limit: 1, runId: run(3), routineId: rt });
    assert.equal((await ledger.drainDecision(rt, run(3))).stop, 'run_did_not_report');
    // PO-0 cools until T0 + 6 h, exactly.
    clock.advance(5 * HOUR - 2);
    assert.equal((await ledger.reportBacklog(rt, ['PO-0'], 1, { runId: run(3) })).workable, 0);
    assert.deepEqual(await ledger.drainDecision(rt, run(3)), { stop: 'nothing_workable', startRuns: 0 });
    clock.advance(1);
    report = await ledger.reportBacklog(rt, ['PO-0', 'PO-1'], 1, { runId: run(3) });
    assert.deepEqual([report.workable, report.extraRuns], [2, 0]);
    assert.deepEqual(await ledger.drainDecision(rt, run(3)), { stop: null, startRuns: 1 });
  });
}

test('reportBacklog and drainDecision refuse bad input with typed errors', async () => {
  const { ledger } = await clocked('sqlite');
  const invalid = [
    [() => ledger.reportBacklog('rt', ['A'], 0), 'batch_size must be from 1 to 4294967295, got 0'],
    [() => ledger.reportBacklog('rt', ['A'], -1), 'batch_size must be from 1 to 4294967295, got -1'],
    [() => ledger.reportBacklog('rt', ['A', ''], 1), 'subject_keys[1] is empty'],
    [() => ledger.reportBacklog('rt', ['A\0'], 1), 'a subject key contains a NUL byte'],
    [() => ledger.reportBacklog('', ['A'], 1), 'routine_id is empty'],
    [() => ledger.reportBacklog('rt', ['A'], 1, { runId: '' }), 'run_id is empty'],
    [() => ledger.reportBacklog('rt', ['A'], 1, { limits: { parallelLimt: 2 } }), "unknown routine limit 'parallel_limt'"],
    [() => ledger.reportBacklog('rt', ['A'], 1, { limits: { parallelLimit: -1 } }), 'parallel_limit must be a whole number from 0 to 4294967295, got -1'],
    [() => ledger.drainDecision('', 'run-1'), 'routine_id is empty'],
    [() => ledger.drainDecision('rt', ''), 'run_id is empty'],
    [() => ledger.drainDecision('rt', 'run-1', { limits: { dailyCap: 1.5 } }), 'daily_cap must be a whole number from 0 to 4294967295 or null, got 1.5'],
  ];
  for (const [call, message] of invalid) {
    // Each call made when it is awaited: a rejection is never left without a handler.
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof InvalidLedgerArgumentError && e instanceof LedgerError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'ledger_invalid_argument');
      assert.ok(e.message.includes(message), `${JSON.stringify(e.message)} should name ${JSON.stringify(message)}`);
      return true;
    });
  }
  const wrongType = [
    [() => ledger.reportBacklog('rt', ['A'], 1.5), TypeError, /batchSize must be a whole number, got 1.5/],
    [() => ledger.reportBacklog('rt', ['A'], '2'), TypeError, /batchSize must be a whole number, got 2/],
    [() => ledger.reportBacklog('rt', [1], 1), ConfigError, /subjectKeys\[0\] must be a string/],
    [() => ledger.reportBacklog('rt', { a: 1 }, 1), ConfigError, /subjectKeys must be an array of strings/],
    [() => ledger.reportBacklog(7, ['A'], 1), TypeError, /routineId must be a string, got number/],
    [() => ledger.reportBacklog('rt', ['A'], 1, { limits: 3 }), TypeError, /limits must be an object/],
    [() => ledger.drainDecision('rt', null), TypeError, /runId must be a string, got null/],
  ];
  for (const [call, cls, message] of wrongType) await assert.rejects(call(), (e) => e instanceof cls && message.test(e.message));
  // Nothing was reported: the routine's drain still says no run reported.
  assert.equal((await ledger.drainDecision('rt', 'run-1')).stop, 'queue_empty');
});

test('the testing clock never runs backwards', () => {
  const clock = new native.TestingClock(T0);
  assert.equal(clock.advance(HOUR), T0 + HOUR);
  assert.throws(() => clock.advance(-1), /ms is how far the clock moves, at least 0, got -1/);
  assert.equal(clock.nowMs(), T0 + HOUR);
  assert.throws(() => new native.TestingClock(-5), /start_ms/);
});
