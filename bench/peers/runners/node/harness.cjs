// The measured loop every Node runner shares (bench/peers/README.md has the protocol): warm-up runs, then
// the measured runs with the process's CPU (every thread), wall time and peak RSS, the checks, and the
// result line. CommonJS, so the CommonJS and the ES-module runners both load it.
'use strict';

const runs = Number(process.env.BENCH_RUNS || 200);
const warmup = Number(process.env.BENCH_WARMUP || 20);

/** Runs `runOnce` warmup + runs times, prints the JSON line and exits (1 on a wrong answer or count). */
async function measure(name, runOnce, calls) {
  try {
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
