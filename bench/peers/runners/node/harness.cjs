// The measured loop every Node runner shares (bench/peers/README.md has the protocol): warm-up runs, then
// the measured runs with the process's CPU (every thread), wall time and peak RSS, the checks, and the
// result line. CommonJS, so the CommonJS and the ES-module runners both load it.
'use strict';

const runs = Number(process.env.BENCH_RUNS || 200);
const warmup = Number(process.env.BENCH_WARMUP || 20);
const concurrency = Number(process.env.BENCH_CONCURRENCY || 0);
const fs = require('fs');

const fds = () => fs.readdirSync('/proc/self/fd').length;

/** BENCH_CONCURRENCY runs in flight at once (Promise.all), each timed; prints the result line. */
async function concurrent(name, runOnce, calls) {
  for (let i = 0; i < warmup; i++) await runOnce();
  const rss0 = Math.round(process.memoryUsage.rss() / 1024);
  const fds0 = fds();
  let peakFds = fds0;
  const sampler = setInterval(() => { peakFds = Math.max(peakFds, fds()); }, 50);
  const timed = async () => {
    const t = process.hrtime.bigint();
    const out = await runOnce();
    return [Number(process.hrtime.bigint() - t) / 1e6, out];
  };
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const results = await Promise.allSettled(Array.from({ length: concurrency }, timed));
  const t1 = process.hrtime.bigint();
  const c = process.cpuUsage(c0);
  clearInterval(sampler);
  const failed = results.filter((r) => r.status === 'rejected');
  if (failed.length) {
    console.error(`${name}: ${failed.length} of ${concurrency} runs failed; first: ${failed[0].reason}`);
    process.exit(1);
  }
  const lat = results.map((r) => r.value[0]).sort((a, b) => a - b);
  const output = String(results[results.length - 1].value[1]);
  if (!output.includes('sunny') || calls() !== warmup + concurrency) {
    console.error(`${name}: wrong result: output=${JSON.stringify(output)}, tool calls=${calls()}`);
    process.exit(1);
  }
  const line = {
    runs: concurrency, concurrency, cpu_ms: (c.user + c.system) / 1000, wall_ms: Number(t1 - t0) / 1e6,
    maxrss_kb: process.resourceUsage().maxRSS, rss_before_kb: rss0,
    lat_p50_ms: lat[Math.floor(lat.length / 2)], lat_p99_ms: lat[Math.min(lat.length - 1, Math.floor(lat.length * 99 / 100))],
    fds_before: fds0, fds_peak: peakFds, tool_calls: calls(), output,
  };
  process.stdout.write(JSON.stringify(line) + '\n');
  process.exit(0);
}

/** Runs `runOnce` warmup + runs times, prints the JSON line and exits (1 on a wrong answer or count). */
async function measure(name, runOnce, calls) {
  try {
    if (concurrency > 0) return await concurrent(name, runOnce, calls);
    let output = '';
    for (let i = 0; i < warmup; i++) output = await runOnce();
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < runs; i++) output = await runOnce();
    const t1 = process.hrtime.bigint();
    const c = process.cpuUsage(c0);
    if (!String(output).includes('sunny') || calls() !== warmup + runs) {
      console.error(`${name}: wrong result: output=${JSON.stringify(output)}, tool calls=${calls()}`);
      process.exit(1);
    }
    const line = {
      runs, cpu_ms: (c.user + c.system) / 1000, wall_ms: Number(t1 - t0) / 1e6,
      maxrss_kb: process.resourceUsage().maxRSS, tool_calls: calls(), output,
    };
    process.stdout.write(JSON.stringify(line) + '\n');
    process.exit(0);
  } catch (e) {
    console.error(`${name}: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  }
}

module.exports = { measure };
