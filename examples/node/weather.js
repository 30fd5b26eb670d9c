'use strict';
// The ambit demo in Node: a weather agent with one host tool.
//   node examples/node/weather.js ["question"]
// A real model when OPENAI_API_KEY or OPENAI_BASE_URL is set (AMBIT_MODEL picks it); else the loopback
// provider (AMBIT_PROVIDER_BIN) with scripted answers, and it says so.

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { Agent, OpenAIChat, tool } = require('../../bindings-node');

const WEATHER = { paris: ['sunny', 22], london: ['rainy', 14], tokyo: ['cloudy', 18] };

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather for a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', description: 'The city\'s name, e.g. "Paris".' } },
    required: ['city'],
  },
  run: ({ city }) => {
    const [sky, temperature_c] = WEATHER[city.trim().toLowerCase()] ?? ['clear', 20];
    return { city, sky, temperature_c };
  },
});

async function scriptedProvider() {
  const bin = process.env.AMBIT_PROVIDER_BIN;
  if (!bin) throw new Error('No model configured: set OPENAI_API_KEY or OPENAI_BASE_URL, or AMBIT_PROVIDER_BIN.');
  const proc = spawn(bin, ['--exit-on-eof', path.join(__dirname, '..', 'scripted', 'weather.json')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [baseUrl] = await readline.createInterface({ input: proc.stdout })[Symbol.asyncIterator]().next()
    .then((r) => [r.value]);
  console.log("No OPENAI_API_KEY or OPENAI_BASE_URL set: using ambit's loopback provider.");
  console.log("The model's answers below are SCRIPTED; the tool call and the agent loop are real.");
  return { baseUrl, stop: () => proc.stdin.end() };
}

async function main() {
  const name = process.env.AMBIT_MODEL || 'gpt-4.1-mini';
  const configured = process.env.OPENAI_API_KEY || process.env.OPENAI_BASE_URL;
  const provider = configured ? null : await scriptedProvider();
  try {
    const model = provider ? new OpenAIChat(name, { baseUrl: provider.baseUrl, apiKey: 'sk-scripted' }) : new OpenAIChat(name);
    const agent = new Agent({ model, instructions: 'You answer weather questions briefly.', tools: [getWeather] });
    const question = process.argv.slice(2).join(' ') || "What's the weather in Paris?";
    console.log(`> ${question}`);
    const result = await agent.run(question);
    for (const c of result.toolCalls) console.log(`  tool ${c.name}(${JSON.stringify(c.arguments)}) -> ${c.result}`);
    console.log(result.output);
    const u = result.usage;
    console.log(`[${u.requests} model requests, ${u.inputTokens} input + ${u.outputTokens} output tokens]`);
  } finally {
    provider?.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
