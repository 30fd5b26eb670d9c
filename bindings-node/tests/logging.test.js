'use strict';
// The logging bridge (`telemetry.setLogger`): the core's `tracing` records reach a JS function, with
// levels, in order. Records arrive on the JS thread in the order the core made them, so a later record's
// arrival proves an earlier one filtered out was not sent (no waiting on time; the timeouts only turn a
// record that never comes into a failure instead of a hang).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const { Agent, TestModel, tool, telemetry, ConfigError } = require('..');

const failing = tool({
  name: 'fail', description: 'Fails.', parameters: { type: 'object', properties: {} },
  run: async () => { throw new Error('disk on fire'); },
});

function agent() {
  return new Agent({ model: new TestModel([{ toolCalls: [{ name: 'fail', arguments: {} }] }, 'Done.']), tools: [failing] });
}

/** A logger keeping its records, and `until(pred, n)`: resolves when n records matching pred came. */
function collector() {
  const records = [];
  let waiters = [];
  const count = (pred) => records.filter(pred).length;
  const fn = (record) => {
    records.push(record);
    waiters = waiters.filter(([pred, n, resolve]) => (count(pred) >= n ? (resolve(), false) : true));
  };
  // The logger does not keep the event loop alive (a program that logs must still exit): while a test
  // waits for a record, an idle interval does, or the loop could end with the record still queued.
  const until = (pred, n = 1) => (count(pred) >= n ? Promise.resolve() : new Promise((resolve) => {
    const alive = setInterval(() => {}, 1_000);
    waiters.push([pred, n, () => { clearInterval(alive); resolve(); }]);
  }));
  return { records, fn, until };
}

const raised = (r) => r.level === 'warn' && r.target === 'ambit::tools' && r.message.includes("tool 'fail' raised")
  && r.message.includes('disk on fire');
const finished = (r) => r.level === 'info' && r.target === 'ambit::agent' && r.message.includes('run finished');

test("the core's records reach the logger with their level, target and message", { timeout: 60_000 }, async () => {
  const c = collector();
  telemetry.setLogger(c.fn, { level: 'info' });
  try {
    await agent().run('Go.');
    await c.until(finished);
    assert.ok(c.records.some(raised), JSON.stringify(c.records));
    assert.ok(Object.isFrozen(c.records[0]));
    // In order: the tool's failure before the run's end.
    assert.ok(c.records.findIndex(raised) < c.records.findIndex(finished));
    assert.ok(!c.records.some((r) => r.level === 'debug' || r.level === 'trace'));
  } finally {
    telemetry.setLogger(null);
  }
});

test('a level keeps what is below it out (negative control: the info record of the first run never comes)', { timeout: 60_000 }, async () => {
  const c = collector();
  telemetry.setLogger(c.fn, { level: 'warn' });
  try {
    await agent().run('Go.');
    await agent().run('Go.');
    // The second run's warning came; the first run's "run finished" (info) was made before it.
    await c.until(raised, 2);
    assert.deepEqual(c.records.filter((r) => r.level !== 'warn' && r.level !== 'error'), []);
  } finally {
    telemetry.setLogger(null);
  }
});

test('setLogger(null) stops the records (negative control), and a new logger gets them again', { timeout: 60_000 }, async () => {
  const before = collector();
  telemetry.setLogger(before.fn, { level: 'trace' });
  telemetry.setLogger(null);
  await agent().run('Go.');
  const after = collector();
  telemetry.setLogger(after.fn, { level: 'debug' });
  try {
    await agent().run('Go.');
    await after.until(finished);
    assert.deepEqual(before.records, []);
    assert.equal(after.records.filter(raised).length, 1);
  } finally {
    telemetry.setLogger(null);
  }
});

test('setLogger refuses what it cannot use, naming it', () => {
  assert.throws(() => telemetry.setLogger('console'), (e) => e instanceof ConfigError && /a function or null, got string/.test(e.message));
  assert.throws(() => telemetry.setLogger(() => {}, { level: 'verbose' }),
    (e) => e instanceof ConfigError && /level must be one of error, warn, info, debug, trace, got "verbose"/.test(e.message));
  assert.throws(() => telemetry.setLogger(() => {}, { levels: 'info' }),
    (e) => e instanceof ConfigError && /unknown option 'levels'/.test(e.message));
});

test("the README's logging example runs as written", () => {
  const repo = path.resolve(__dirname, '..', '..');
  const code = execFileSync('python3', [path.join(repo, 'tests/packages/readme_block.py'), path.join(repo, 'README.md'),
    'Telemetry', 'js', '2'], { encoding: 'utf8' });
  const file = path.join(__dirname, '.readme-logging.js');
  fs.writeFileSync(file, code.replace('require("ambit-sdk")', "require('..')"));
  try {
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8' });
    assert.match(out, /^\[warn ambit::tools\] tool 'fail' raised/m);
    assert.match(out, /^Done\.$/m);
    // flushLogger: the run's warning was logged before the program printed its answer and ended.
    assert.ok(out.indexOf('[warn ambit::tools]') < out.indexOf('Done.'), out);
  } finally {
    fs.rmSync(file, { force: true });
  }
});

test('flushLogger resolves after every record made before it reached the logger', async () => {
  await telemetry.flushLogger(); // no logger: resolves at once
  const { records, fn } = collector();
  telemetry.setLogger(fn, { level: 'warn' });
  try {
    const r = await agent().run('Go.');
    assert.equal(r.output, 'Done.');
    // No waiting for a record: the flush alone orders it before this line. The empty marker text is not
    // a record.
    await telemetry.flushLogger();
    assert.ok(records.some((x) => x.level === 'warn' && x.target === 'ambit::tools'), JSON.stringify(records));
    assert.ok(records.every((x) => typeof x.message === 'string' && x.message !== ''));
  } finally {
    telemetry.setLogger(null);
  }
});
