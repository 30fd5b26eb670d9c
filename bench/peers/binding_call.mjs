// The cost of one call from Node into ambit's Rust core and back (goal: 2 µs or less).
//
// Times `wireName("get_weather")`: a synchronous binding function that crosses into the core
// (ambit::tools::wire_name::wire_name), converts a string each way and returns. The name is already
// wire-safe, so the core's own work is a scan of 11 characters and a copy: what is left is the binding.
// The native `taskCancelled(0)` (a number in, a boolean out, a lookup in the core) and an empty JS
// function are timed beside it for scale.
//
//   AMBIT_NODE=/path/to/bindings-node node bench/peers/binding_call.mjs   (default: this clone's bindings-node)
//
// Prints one JSON line: {"node_ns_per_call": ..., "function": ..., ...}.

import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const dir = path.resolve(process.env.AMBIT_NODE || path.join(import.meta.dirname, '..', '..', 'bindings-node'));
const ambit = require(dir);
const native = require(path.join(dir, 'native', 'index.js'));

const ROUNDS = Number(process.env.BENCH_ROUNDS || 7);
const TARGET_NS = Number(process.env.BENCH_SECONDS || 0.3) * 1e9; // per round

// Median ns per call over ROUNDS rounds of about TARGET_NS each; the loop is unrolled 10x, and every
// result is kept alive so the calls cannot be dropped.
function perCall(fn, arg) {
  let sink = 0;
  const round = (n) => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0;
      sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0;
      sink ^= fn(arg) ? 1 : 0; sink ^= fn(arg) ? 1 : 0;
    }
    return Number(process.hrtime.bigint() - t);
  };
  let n = 1000;
  let dt;
  while ((dt = round(n)) < 50e6) n *= 4; // size a round (and warm up the JIT)
  n = Math.max(1, Math.round((n * TARGET_NS) / dt));
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) rounds.push(round(n) / (n * 10));
  rounds.sort((a, b) => a - b);
  globalThis.__sink = sink;
  return [rounds[Math.floor(rounds.length / 2)], n * 10 * ROUNDS];
}

if (ambit.wireName('get_weather') !== 'get_weather') throw new Error('wireName answered wrongly');
const [wire, calls] = perCall(ambit.wireName, 'get_weather');
const [cancelled] = perCall(native.taskCancelled, 0);
const [baseline] = perCall((x) => x, 'get_weather');
console.error(`wireName('get_weather'):   ${wire.toFixed(1)} ns/call (${calls} calls)`);
console.error(`native.taskCancelled(0):   ${cancelled.toFixed(1)} ns/call`);
console.error(`an empty JS function:      ${baseline.toFixed(1)} ns/call`);
console.log(JSON.stringify({
  node_ns_per_call: Math.round(wire * 10) / 10,
  function: "wireName('get_weather')",
  calls,
  task_cancelled_ns_per_call: Math.round(cancelled * 10) / 10,
  empty_js_function_ns_per_call: Math.round(baseline * 10) / 10,
  module: dir,
  node: process.version,
}));
