'use strict';
// Unknown options are refused by name, everywhere an options object is taken: a misspelt key would
// otherwise be ignored (a `signl` that leaves a run uncancellable, a `leasMs` that keeps the default).
// Each refusal has its control: the same call with the known key goes through.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Agent, ConfigError, Ledger, Memory, Routines, Runner, Sessions, TestModel } = require('..');

async function refused(call, what, key) {
  await assert.rejects(
    async () => call(),
    (e) => {
      assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${e && e.stack}`);
      assert.equal(e.code, 'config');
      assert.match(e.message, new RegExp(`^${what.replace('.', '\\.')}: unknown option '${key}' \\(known: `));
      return true;
    },
  );
}

function tmp() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-options-'));
}

test('run and stream refuse an unknown option by name; signal is known', async () => {
  const agent = new Agent({ model: new TestModel(['one', 'two']) });
  const controller = new AbortController();
  await refused(() => agent.run('hi', { signl: controller.signal }), 'Agent.run', 'signl');
  await refused(async () => {
    for await (const _ of agent.stream('hi', { signl: controller.signal }));
  }, 'Agent.stream', 'signl');
  // The control: the known option is taken (and the refused calls did not consume a reply).
  assert.equal((await agent.run('hi', { signal: controller.signal })).output, 'one');
  assert.equal((await agent.run('hi', {})).output, 'two');
});

test('the stores refuse an unknown option by name', async () => {
  const dir = tmp();
  await refused(() => Ledger.open(`sqlite://${dir}/l.db`, { durabilty: 'fast' }), 'Ledger.open', 'durabilty');
  await refused(() => Sessions.open(`sqlite://${dir}/s.db`, { leasMs: 10 }), 'Sessions.open', 'leasMs');
  const ledger = await Ledger.open(`sqlite://${dir}/l.db`, { durability: 'fast' });
  const sessions = await Sessions.open(`sqlite://${dir}/s.db`, { leaseMs: 5000 });
  await refused(() => ledger.drainDecision('r', 'run-1', { limit: {} }), 'Ledger.drainDecision', 'limit');
  assert.deepEqual(Object.keys(await ledger.drainDecision('r', 'run-1', { limits: {} })).sort(), ['startRuns', 'stop']);

  const memory = await Memory.open(`sqlite://${dir}/m.db`);
  await memory.remember('clerk', { body: 'The wifi is Acme-Guest.', key: 'wifi' });
  await refused(() => memory.recall('clerk', { querry: 'wifi' }), 'Memory.recall', 'querry');
  await refused(() => memory.forget('clerk', { name: 'wifi' }), 'Memory.forget', 'name');
  assert.equal((await memory.recall('clerk', { query: 'wifi' })).length, 1);
  assert.equal(await memory.forget('clerk', { key: 'wifi' }), true);

  const routines = await Routines.open(`sqlite://${dir}/r.db`);
  await refused(() => new Runner(routines, sessions, { agents: {}, pollMS: 50 }), 'Runner', 'pollMS');
  const runner = new Runner(routines, sessions, { agents: {}, pollMs: 50 });
  await refused(() => runner.runForever({ signall: AbortSignal.abort() }), 'Runner.runForever', 'signall');
  await runner.runForever({ signal: AbortSignal.abort() });
});
