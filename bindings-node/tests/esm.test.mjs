// The ES module entry point at run time, imported by the package's own name as a user's .mjs file
// would (`import … from "ambit-sdk"`; Node resolves it through package.json "exports"), beside CommonJS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import ambitDefault, { Agent, Ledger, Sessions, OpenAIChat, tool, AmbitError, SESSION_TOOLS } from 'ambit-sdk';
import * as esm from 'ambit-sdk';

const require = createRequire(import.meta.url);
const cjs = require('ambit-sdk');

test('the ESM entry point hands out the CommonJS exports, the same objects', () => {
  for (const [name, value] of Object.entries({ Agent, Ledger, Sessions, OpenAIChat, tool, AmbitError, SESSION_TOOLS })) {
    assert.ok(value !== undefined, `${name} is exported`);
    assert.equal(value, cjs[name], `${name} is the CommonJS one`);
  }
  assert.equal(ambitDefault, cjs);
  assert.equal(typeof new OpenAIChat('m', { baseUrl: 'http://127.0.0.1:9' }), 'object');
});

test('every CommonJS export has an ESM export of the same name', () => {
  const missing = Object.keys(cjs).filter((name) => !(name in esm));
  assert.deepEqual(missing, []);
  // The negative control: the comparison sees a name the ESM list lacks.
  const withExtra = { ...cjs, NotListed: 1 };
  assert.deepEqual(Object.keys(withExtra).filter((name) => !(name in esm)), ['NotListed']);
});
