'use strict';
// Every routine scenario file in tests/scenarios/routines/, run from Node on SQLite and (when
// scripts/test.sh started it) PostgreSQL: the same files the Rust and Python suites run (see the README
// there). Results are camelCase here; they are compared in the core's snake_case.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');

const { Agent, OpenAIChat, Sessions, Routines, Runner, Ledger, RoutineError } = require('..');
const native = require('../native.js');
const { toSnake, camel } = require('../envelope.js');

const DIR = path.join(__dirname, '..', '..', 'tests', 'scenarios', 'routines');
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
const { CACHE, providerPath } = require('./support.js');


function startProvider(file) {
  const child = spawn(providerPath(), ['--exit-on-eof', file], { stdio: ['pipe', 'pipe', 'inherit'] });
  const stop = () => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  };
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    readline.createInterface({ input: child.stdout }).once('line', (line) => {
      const baseUrl = line.trim();
      const state = async () => (await fetch(baseUrl.replace(/\/v1$/, '/__ambit/state'))).json();
      resolve({ baseUrl, stop, state });
    });
  });
}

/** `want` within `got`: objects by the keys given (a wanted null matches an absent key), arrays item by item. */
function subset(want, got, at) {
  if (want !== null && typeof want === 'object' && !Array.isArray(want)) {
    assert.ok(got !== null && typeof got === 'object', `${at}: expected an object, got ${JSON.stringify(got)}`);
    for (const [k, v] of Object.entries(want)) subset(v, got[k], `${at}.${k}`);
  } else if (Array.isArray(want)) {
    assert.ok(Array.isArray(got) && got.length === want.length, `${at}: expected ${want.length} items, got ${JSON.stringify(got)}`);
    want.forEach((w, i) => subset(w, got[i], `${at}[${i}]`));
  } else {
    assert.deepEqual(got ?? null, want, at);
  }
}

function storeUrl(store) {
  if (store === 'sqlite') return `sqlite://${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-rs-')), 'routines.db')}`;
  return process.env.AMBIT_TEST_POSTGRES_URL;
}

function suffixed(d, suffix) {
  const out = { ...d };
  for (const key of ['id', 'agent']) if (typeof out[key] === 'string') out[key] += suffix;
  return out;
}

async function runScenario(scenario, url, baseUrl, suffix) {
  const spec = scenario.routine;
  const clock = new native.TestingClock(spec.clock_ms);
  const routines = new Routines(await native._testingOpenRoutines(url, clock));
  const sessions = new Sessions(await native._testingOpenSessions(url, '{}', clock));
  const ledger = spec.ledger ? new Ledger(await native._testingOpenLedger(url, clock)) : undefined;
  const model = new OpenAIChat('m', { baseUrl, maxRetries: 0 });
  const runner = new Runner(routines, sessions, {
    agents: { [`scenario${suffix}`]: (ctx) => new Agent({ model, routine: ctx }) },
    leaseMs: 3_600_000,
    ledger,
  });
  for (const [i, step] of spec.steps.entries()) {
    const at = `step ${i} (${step.op})`;
    const id = `${step.id ?? ''}${suffix}`;
    const actor = step.actor ?? 'scenario';
    let got;
    try {
      switch (step.op) {
        case 'clock':
          clock.advance(Math.max(0, step.at - clock.nowMs()));
          continue;
        case 'create':
          got = await routines.create(suffixed(step.definition, suffix), { actor });
          break;
        case 'update':
          got = await routines.update(id, step.changes, { actor });
          break;
        case 'get':
          got = await routines.get(id);
          break;
        case 'delete':
          got = await routines.delete(id, { actor });
          break;
        case 'revisions':
          got = await routines.revisions(id);
          break;
        case 'runs':
          got = (await routines.runs({ routineId: id })).sort((a, b) => a.startedAt - b.startedAt || a.kind.localeCompare(b.kind));
          break;
        case 'skipped':
          got = await routines.skipped({ routineId: id });
          break;
        case 'tick':
          clock.advance(Math.max(0, step.at - clock.nowMs()));
          got = await runner.tick(step.at);
          // The runs it started end before the next step.
          await runner.waitIdle();
          break;
        default:
          assert.fail(`${at}: unknown op ${step.op}`);
      }
    } catch (e) {
      if (!(e instanceof RoutineError)) throw e;
      assert.ok(step.error, `${at}: ${e.message}`);
      const want = { ...step.error };
      if (want.field != null) want.field = camel(want.field);
      subset(want, { code: e.code, field: e.field }, at);
      continue;
    }
    assert.ok(!step.error, `${at}: expected the error ${JSON.stringify(step.error)}, got ${JSON.stringify(got)}`);
    if (step.expect !== undefined) subset(step.expect, toSnake(got ?? null), at);
  }
}

const STORES = ['sqlite', ...(process.env.AMBIT_TEST_POSTGRES_URL ? ['postgres'] : [])];

for (const store of STORES) {
  for (const file of FILES) {
    test(`routine scenario ${file} on ${store}`, async () => {
      const full = path.join(DIR, file);
      const p = await startProvider(full);
      try {
        const scenario = JSON.parse(fs.readFileSync(full, 'utf8'));
        await runScenario(scenario, storeUrl(store), p.baseUrl, `-${crypto.randomBytes(6).toString('hex')}`);
        const state = await p.state();
        assert.deepEqual(state.mismatches, []);
        assert.equal(state.remaining, 0, 'every scripted exchange was used');
      } finally {
        p.stop();
      }
    });
  }
}

test('a tick a millisecond early fails the routine files that run slots', async () => {
  let caught = 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-rs-neg-'));
  for (const file of FILES) {
    const scenario = JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8'));
    const step = scenario.routine.steps.find((s) => s.op === 'tick' && s.expect && s.expect.started && s.expect.started.length > 0);
    if (!step) continue;
    step.at -= 1;
    const moved = path.join(dir, file);
    fs.writeFileSync(moved, JSON.stringify(scenario));
    const p = await startProvider(moved);
    try {
      await assert.rejects(runScenario(scenario, storeUrl('sqlite'), p.baseUrl, '-neg'), assert.AssertionError);
    } finally {
      p.stop();
    }
    caught += 1;
  }
  assert.ok(caught >= 5, `only ${caught} files ran slots`);
});
