// @openai/agents (Node): the weather job (see bench/peers/README.md for the protocol).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { measure } from './harness.cjs';

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

await measure('openai_agents.mjs', runOnce, () => calls);
