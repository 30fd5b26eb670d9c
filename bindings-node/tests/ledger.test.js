'use strict';
// The work ledger from Node, on SQLite: claim -> record -> list, and an atomic batch rejected whole.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Agent, OpenAIChat, Ledger, RoutineLedger, AmbitError, InvalidBatchError, NotClaimedError, ScopePinnedError, LedgerError } = require('..');

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
