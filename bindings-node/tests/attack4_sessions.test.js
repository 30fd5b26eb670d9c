'use strict';
// Outside attack (attack4) on the session settings from Node: a lease or a busy wait that is NaN,
// Infinity, negative, fractional, a string or past 2**63 must be refused with invalid_argument naming
// the setting. JSON.stringify turns NaN and Infinity into null, which the core reads as "not set":
// the bad value is silently replaced by the default. (Was a hole: fixed in the core's config decoding;
// the binding sends NaN and Infinity by name.)

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Sessions } = require('..');

const BAD = [
  [{ leaseMs: NaN }, 'lease_ms'],
  [{ leaseMs: Infinity }, 'lease_ms'],
  [{ leaseMs: -1 }, 'lease_ms'],
  [{ leaseMs: 2 ** 63 }, 'lease_ms'],
  [{ leaseMs: 1.5 }, 'lease_ms'],
  [{ leaseMs: '30000' }, 'lease_ms'],
  [{ busyWaitMs: NaN }, 'busy_wait_ms'],
  [{ busyWaitMs: -5 }, 'busy_wait_ms'],
];

for (const [options, named] of BAD) {
  test(`a bad setting ${JSON.stringify(Object.keys(options))}=${String(Object.values(options)[0])} is refused naming ${named}`, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-attack4-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const url = `sqlite://${dir}/s.db`;
    await assert.rejects(Sessions.open(url, options), (e) => {
      assert.equal(e.code, 'invalid_argument', String(e));
      assert.ok(e.message.includes(named), e.message);
      return true;
    });
  });
}

test('control: in-range whole numbers (and undefined) open the store', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-attack4-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const options of [{ leaseMs: 30000, busyWaitMs: 0 }, { leaseMs: 86400000 }, {}]) {
    await Sessions.open(`sqlite://${dir}/s.db`, options);
  }
});
