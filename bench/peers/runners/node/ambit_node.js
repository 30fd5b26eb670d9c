// ambit from Node: the weather job (see bench/peers/README.md for the protocol).
'use strict';
const fs = require('node:fs');
const { Agent, OpenAIChat, OpenAIResponses, Anthropic, tool } = require(process.env.AMBIT_NODE || 'ambit');

const env = process.env;
const wire = env.BENCH_WIRE || 'chat';
const stream = env.BENCH_STREAM === '1';
const runs = Number(env.BENCH_RUNS || 200);
const warmup = Number(env.BENCH_WARMUP || 20);
let calls = 0;

const tools = [
  tool({
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    run: ({ city }) => {
      calls += 1;
      return `sunny in ${city}`;
    },
  }),
];
let extra = [];
if (env.BENCH_TOOLS) {
  extra = JSON.parse(fs.readFileSync(env.BENCH_TOOLS, 'utf8'));
  for (const t of extra) tools.push(tool({ ...t, run: () => 'ok' }));
}
const deferral = env.BENCH_DEFER === '1' ? { deferrableTools: extra.map((t) => t.name) } : undefined;
const Model = { chat: OpenAIChat, responses: OpenAIResponses, anthropic: Anthropic }[wire];
const modelName = wire === 'anthropic' ? 'claude-sonnet-4-5' : 'gpt-4.1';
const agent = new Agent({
  model: new Model(modelName, { baseUrl: env.BENCH_BASE_URL, apiKey: 'bench-key', stream }),
  tools,
  deferral,
});
process.stdout.write('READY\n');

(async () => {
  let output = '';
  for (let i = 0; i < warmup; i++) output = (await agent.run('weather in Paris?')).output;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) output = (await agent.run('weather in Paris?')).output;
  const t1 = process.hrtime.bigint();
  const c = process.cpuUsage(c0);
  if (!output.includes('sunny') || calls !== warmup + runs) {
    console.error(`ambit_node: wrong result: output=${JSON.stringify(output)}, tool calls=${calls}`);
    process.exit(1);
  }
  const line = {
    runs, cpu_ms: (c.user + c.system) / 1000, wall_ms: Number(t1 - t0) / 1e6,
    maxrss_kb: process.resourceUsage().maxRSS, tool_calls: calls, output,
  };
  process.stdout.write(JSON.stringify(line) + '\n');
  process.exit(0);
})().catch((e) => {
  console.error(`ambit_node: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
