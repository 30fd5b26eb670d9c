// ambit from Node: the weather job (see bench/peers/README.md for the protocol).
'use strict';
const fs = require('node:fs');
const { measure } = require('./harness.cjs');
const { Agent, OpenAIChat, OpenAIResponses, Anthropic, tool } = require(process.env.AMBIT_NODE || 'ambit');

const env = process.env;
const wire = env.BENCH_WIRE || 'chat';
const stream = env.BENCH_STREAM === '1';
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

// `BENCH_EVENTS=1`: the run through `agent.stream`, iterated to its `run_finished` event (the events'
// plumbing from the core to JS), instead of `agent.run`.
const runOnce = env.BENCH_EVENTS === '1'
  ? async () => {
    let output;
    for await (const event of agent.stream('weather in Paris?')) {
      if (event.type === 'run_finished') output = event.result.output;
    }
    return output;
  }
  : async () => (await agent.run('weather in Paris?')).output;
measure('ambit_node.js', runOnce, () => calls);
