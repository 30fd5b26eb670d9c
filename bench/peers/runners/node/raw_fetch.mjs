// The Node floor: the global fetch doing the weather job's two requests by hand, SSE parsed by hand (see
// bench/peers/README.md for the protocol). No packages.
import fs from 'node:fs';
import { measure } from './harness.cjs';

const env = process.env;
const wire = env.BENCH_WIRE || 'chat';
const stream = env.BENCH_STREAM === '1';
if (wire !== 'chat' && wire !== 'responses') {
  console.error(`unsupported: wire ${wire}`);
  process.exit(3);
}
const PROMPT = 'weather in Paris?';
let calls = 0;

const functions = {
  get_weather: ({ city }) => {
    calls += 1;
    return `sunny in ${city}`;
  },
};
const specs = [{
  name: 'get_weather',
  description: 'Current weather for a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];
if (env.BENCH_TOOLS) {
  for (const t of JSON.parse(fs.readFileSync(env.BENCH_TOOLS, 'utf8'))) {
    specs.push({ name: t.name, description: t.description, parameters: t.parameters });
    functions[t.name] = () => 'ok';
  }
}
const chatTools = specs.map((s) => ({ type: 'function', function: s }));
const responsesTools = specs.map((s) => ({ type: 'function', strict: false, ...s }));
const url = `${env.BENCH_BASE_URL}/${wire === 'chat' ? 'chat/completions' : 'responses'}`;
const headers = { 'content-type': 'application/json', authorization: 'Bearer bench-key' };
process.stdout.write('READY\n');

const call = (name, args) => functions[name](JSON.parse(args));

async function post(body) {
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return res;
}

// Yields the parsed `data:` payload of each SSE event, until `[DONE]` or the end of the body.
async function* sse(res) {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        yield JSON.parse(data);
      }
    }
  }
}

async function chatTurn(messages) {
  const body = { model: 'gpt-4.1', messages, tools: chatTools };
  if (!stream) return (await (await post(body)).json()).choices[0].message;
  let content = '';
  const toolCalls = [];
  for await (const chunk of sse(await post({ ...body, stream: true }))) {
    const delta = chunk.choices?.[0]?.delta;
    if (!delta) continue;
    content += delta.content ?? '';
    for (const tc of delta.tool_calls ?? []) {
      const acc = (toolCalls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      acc.id += tc.id ?? '';
      acc.function.name += tc.function?.name ?? '';
      acc.function.arguments += tc.function?.arguments ?? '';
    }
  }
  const message = { role: 'assistant', content: content || null };
  if (toolCalls.length) message.tool_calls = toolCalls;
  return message;
}

async function runChat() {
  const messages = [{ role: 'user', content: PROMPT }];
  for (let turn = 0; turn < 2; turn++) {
    const message = await chatTurn(messages);
    if (!message.tool_calls?.length) return message.content ?? '';
    messages.push(message);
    for (const tc of message.tool_calls) {
      messages.push({ role: 'tool', tool_call_id: tc.id, content: call(tc.function.name, tc.function.arguments) });
    }
  }
  return '';
}

async function responsesTurn(input) {
  const body = { model: 'gpt-4.1', input, tools: responsesTools };
  if (!stream) return (await post(body)).json();
  let response;
  for await (const event of sse(await post({ ...body, stream: true }))) {
    if (event.type === 'response.completed') response = event.response;
  }
  if (!response) throw new Error('stream ended without response.completed');
  return response;
}

async function runResponses() {
  const input = [{ role: 'user', content: PROMPT }];
  for (let turn = 0; turn < 2; turn++) {
    const response = await responsesTurn(input);
    const fcs = response.output.filter((o) => o.type === 'function_call');
    if (!fcs.length) {
      return response.output.filter((o) => o.type === 'message')
        .flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
    }
    for (const fc of fcs) {
      input.push({ type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments });
      input.push({ type: 'function_call_output', call_id: fc.call_id, output: call(fc.name, fc.arguments) });
    }
  }
  return '';
}

const runOnce = wire === 'chat' ? runChat : runResponses;

await measure('raw_fetch.mjs', runOnce, () => calls);
