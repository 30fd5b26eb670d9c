'use strict';
// The Node demo (examples/node/weather.js) runs as a user runs it, with scripted answers.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');

function providerBin() {
  const candidates = [
    process.env.AMBIT_PROVIDER,
    process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, 'debug', 'ambit-provider'),
    path.join(os.homedir(), '.cache', 'ambit', 'target', 'debug', 'ambit-provider'),
  ].filter(Boolean);
  const found = candidates.find((p) => fs.existsSync(p));
  assert.ok(found, `the loopback provider is not built (looked in ${candidates.join(', ')})`);
  return found;
}

test('the demo runs scripted when no model is configured', () => {
  const env = { ...process.env, AMBIT_PROVIDER_BIN: providerBin() };
  delete env.OPENAI_API_KEY;
  delete env.OPENAI_BASE_URL;
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', '..', 'examples', 'node', 'weather.js')], {
    env,
    encoding: 'utf8',
    timeout: 60000,
  });
  assert.match(out, /SCRIPTED/);
  assert.match(out, /tool get_weather\(\{"city":"Paris"\}\) -> \{"city":"Paris","sky":"sunny","temperature_c":22\}/);
  assert.match(out, /\(scripted\) In Paris it is sunny and 22 °C\./);
  assert.match(out, /\[2 model requests, 157 input \+ 30 output tokens\]/);
});
