// The Vercel AI SDK (`ai` + @ai-sdk/openai-compatible, Node): the weather job (see bench/peers/README.md for the
// protocol). Chat Completions only: that is the wire the OpenAI-compatible provider speaks.
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
const { generateText, streamText, tool, jsonSchema, isStepCount } = await load('ai');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible');
const { z } = await load('zod');

const env = process.env;
const wire = env.BENCH_WIRE || 'chat';
const stream = env.BENCH_STREAM === '1';
if (wire !== 'chat') {
  console.error(`unsupported: wire ${wire} (@ai-sdk/openai-compatible speaks Chat Completions only)`);
  process.exit(3);
}
let calls = 0;

const tools = {
  get_weather: tool({
    description: 'Current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls += 1;
      return `sunny in ${city}`;
    },
  }),
};
if (env.BENCH_TOOLS) {
  for (const t of JSON.parse(fs.readFileSync(env.BENCH_TOOLS, 'utf8'))) {
    tools[t.name] = tool({ description: t.description, inputSchema: jsonSchema(t.parameters), execute: async () => 'ok' });
  }
}
const provider = createOpenAICompatible({ name: 'bench', baseURL: env.BENCH_BASE_URL, apiKey: 'bench-key' });
const model = provider('gpt-4.1');
const stopWhen = isStepCount(2);
process.stdout.write('READY\n');

async function runOnce() {
  if (stream) {
    const result = streamText({ model, tools, stopWhen, prompt: 'weather in Paris?' });
    for await (const _ of result.textStream); // drain the text deltas
    return await result.text;
  }
  return (await generateText({ model, tools, stopWhen, prompt: 'weather in Paris?' })).text;
}

await measure('vercel_ai.mjs', runOnce, () => calls);
