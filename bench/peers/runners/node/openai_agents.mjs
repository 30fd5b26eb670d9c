// @openai/agents (Node): the weather job (see bench/peers/README.md for the protocol).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The peers live in $AMBIT_CACHE/bench/node/node_modules (BENCH_NODE_MODULES), outside this clone: import each
// package's ESM entry by absolute path, as a bare `import` from inside that project would.
const nodeModules = process.env.BENCH_NODE_MODULES
  || path.join(process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache/ambit'), 'bench/node/node_modules');
async function load(pkg) {
  const dir = path.join(nodeModules, pkg);
  const { exports, main } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  let entry = exports?.['.'] ?? exports ?? main;
  while (typeof entry === 'object') entry = entry.import ?? entry.default;
  return import(pathToFileURL(path.join(dir, entry)).href);
}
const { Agent, run, tool, setTracingDisabled, OpenAIChatCompletionsModel, OpenAIResponsesModel } =
  await load('@openai/agents');
const { default: OpenAI } = await load('openai');
const { z } = await load('zod');

const env = process.env;
const wire = env.BENCH_WIRE || 'chat';
const stream = env.BENCH_STREAM === '1';
const runs = Number(env.BENCH_RUNS || 200);
const warmup = Number(env.BENCH_WARMUP || 20);
if (wire !== 'chat' && wire !== 'responses') {
  console.error(`unsupported: wire ${wire}`);
  process.exit(3);
}
setTracingDisabled(true);
let calls = 0;

const tools = [
  tool({
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: z.object({ city: z.string() }),
    execute: ({ city }) => {
      calls += 1;
      return `sunny in ${city}`;
    },
  }),
];
if (env.BENCH_TOOLS) {
  for (const t of JSON.parse(fs.readFileSync(env.BENCH_TOOLS, 'utf8'))) {
    tools.push(tool({ ...t, strict: false, execute: () => 'ok' }));
  }
}
const client = new OpenAI({ baseURL: env.BENCH_BASE_URL, apiKey: 'bench-key' });
const Model = wire === 'chat' ? OpenAIChatCompletionsModel : OpenAIResponsesModel;
const agent = new Agent({ name: 'Assistant', model: new Model(client, 'gpt-4.1'), tools });
process.stdout.write('READY\n');

async function runOnce() {
  if (stream) {
    const result = await run(agent, 'weather in Paris?', { stream: true });
    for await (const _ of result); // drain the events
    await result.completed;
    return result.finalOutput;
  }
  return (await run(agent, 'weather in Paris?')).finalOutput;
}

try {
  let output = '';
  for (let i = 0; i < warmup; i++) output = await runOnce();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) output = await runOnce();
  const t1 = process.hrtime.bigint();
  const c = process.cpuUsage(c0);
  if (!String(output).includes('sunny') || calls !== warmup + runs) {
    console.error(`openai_agents.mjs: wrong result: output=${JSON.stringify(output)}, tool calls=${calls}`);
    process.exit(1);
  }
  const line = {
    runs, cpu_ms: (c.user + c.system) / 1000, wall_ms: Number(t1 - t0) / 1e6,
    maxrss_kb: process.resourceUsage().maxRSS, tool_calls: calls, output,
  };
  process.stdout.write(JSON.stringify(line) + '\n');
  process.exit(0);
} catch (e) {
  console.error(`openai_agents.mjs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
}
