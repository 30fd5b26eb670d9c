'use strict';
// What several test files share: the loopback provider (ambit-provider, built by scripts/test-node.sh)
// and child servers that print their URL on their first line and serve until their stdin closes.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const CACHE = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');

/** The loopback provider's binary. */
function providerPath() {
  const candidates = [
    process.env.AMBIT_PROVIDER,
    process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, 'debug', 'ambit-provider'),
    path.join(CACHE, 'target', 'debug', 'ambit-provider'),
  ].filter(Boolean);
  const found = candidates.find((p) => fs.existsSync(p));
  assert.ok(found, `the loopback provider is not built (looked in ${candidates.join(', ')})`);
  return found;
}

/** Starts `command args`, which prints its URL first; resolves to `{url, stop}` (stop closes its stdin). */
function startLineServer(command, args) {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const stop = () => {
    child.stdin.end();
    if (child.exitCode === null) child.kill();
  };
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    readline.createInterface({ input: child.stdout }).once('line', (line) => resolve({ url: line.trim(), stop }));
  });
}

/** The provider serving a scenario written from `name` and `exchanges`: `{baseUrl, stop, state}`. */
async function startScriptedProvider(name, exchanges) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-provider-')), `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ name, exchanges }));
  const { url, stop } = await startLineServer(providerPath(), ['--exit-on-eof', file]);
  const state = async () => (await fetch(url.replace(/\/v1$/, '/__ambit/state'))).json();
  return { baseUrl: url, stop, state };
}

module.exports = { CACHE, providerPath, startLineServer, startScriptedProvider };
