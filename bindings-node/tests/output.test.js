'use strict';
// Typed final output from Node: `outputType` (a JSON Schema, and `parse` for your type, e.g. a zod
// schema's), checked by the core, decoded into `result.structuredOutput`; bad options refused by name.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const { Agent, OpenAIChat, ConfigError, OutputInvalidError } = require('..');

const CACHE = process.env.AMBIT_CACHE || path.join(os.homedir(), '.cache', 'ambit');

function startProvider(exchanges) {
  const bin = [process.env.AMBIT_PROVIDER, process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, 'debug', 'ambit-provider'),
    path.join(CACHE, 'target', 'debug', 'ambit-provider')].filter(Boolean).find((p) => fs.existsSync(p));
  assert.ok(bin, 'the loopback provider is not built');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-output-')), 'output.json');
  fs.writeFileSync(file, JSON.stringify({ name: 'node_output', exchanges }));
  const child = spawn(bin, ['--exit-on-eof', file], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    readline.createInterface({ input: child.stdout }).once('line', (line) => resolve({ baseUrl: line.trim(), stop: () => child.stdin.end() }));
  });
}

const schema = {
  type: 'object',
  properties: { city: { type: 'string' }, temperatureC: { type: 'integer' } },
  required: ['city', 'temperatureC'],
  additionalProperties: false,
};

/** A type of the caller's: what `parse` builds from the checked JSON. */
class Weather {
  constructor({ city, temperatureC }) {
    this.city = city;
    this.temperatureC = temperatureC;
  }
}

test('the checked answer reaches parse and comes back typed', async () => {
  const p = await startProvider([
    { expect: { body: { response_format: { type: 'json_schema', json_schema: { name: 'Weather', schema } } } },
      respond: { content: '{"city": "Paris", "temperatureC": 22.0}' } },
  ]);
  try {
    const seen = [];
    const agent = new Agent({
      model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, maxRetries: 0 }),
      outputType: { name: 'Weather', schema, parse: (v) => { seen.push(v); return new Weather(v); } },
    });
    const result = await agent.run('Weather in Paris?');
    assert.deepEqual(seen, [{ city: 'Paris', temperatureC: 22 }], 'parse gets the JSON as the core read it (22.0 is 22)');
    assert.ok(result.structuredOutput instanceof Weather);
    assert.equal(result.structuredOutput.city, 'Paris');
  } finally {
    p.stop();
  }
});

test('an answer that never matches is an OutputInvalidError with the last attempt; parse never runs', async () => {
  const p = await startProvider([
    { respond: { content: '{"city": "Paris"}' } },
    { respond: { content: '{"city": "Paris", "temperatureC": "warm"}' } },
  ]);
  try {
    let parsed = 0;
    const agent = new Agent({
      model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, maxRetries: 0 }),
      outputType: { name: 'Weather', schema, retries: 1, parse: () => { parsed += 1; } },
    });
    await assert.rejects(agent.run('Weather in Paris?'), (e) => {
      assert.ok(e instanceof OutputInvalidError, `${e.name}: ${e.message}`);
      assert.equal(e.code, 'output_invalid');
      assert.equal(e.attempt, '{"city": "Paris", "temperatureC": "warm"}');
      assert.equal(e.retries, 1);
      assert.match(e.message, /temperatureC/);
      return true;
    });
    assert.equal(parsed, 0);
  } finally {
    p.stop();
  }
});

test('bad output types are refused by name', () => {
  const model = new OpenAIChat('m');
  assert.throws(() => new Agent({ model, outputType: 'Weather' }), TypeError);
  assert.throws(() => new Agent({ model, outputType: { name: 'Weather' } }), /outputType.schema must be a JSON Schema object/);
  assert.throws(() => new Agent({ model, outputType: { name: 'Weather', schema, parze: () => 1 } }), /unknown option 'parze'/);
  assert.throws(() => new Agent({ model, outputType: { name: 'Weather', schema, retries: -1 } }), ConfigError);
  assert.throws(() => new Agent({ model, outputType: { name: 'my answer', schema } }), (e) => e instanceof ConfigError && /'my answer'/.test(e.message));
  assert.throws(() => new Agent({ model, outputType: { name: 'W', schema: { type: 'array' } } }), /"type": "object"/);
});

test('a zod schema is an output type: its JSON Schema goes to the wire, its parse builds the answer', async () => {
  // zod 4 as the MCP servers' install has it (scripts/mcp-servers.sh, which the suite runs anyway).
  const { execFileSync } = require('node:child_process');
  const mcp = execFileSync('bash', [path.join(__dirname, '..', '..', 'scripts', 'mcp-servers.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const { z } = require(path.join(mcp, 'npm', 'node_modules', 'zod'));
  const Weather = z.object({ city: z.string(), sky: z.enum(['sunny', 'cloudy']) }).transform((w) => ({ ...w, loud: w.city.toUpperCase() }));
  const json = { type: 'object', properties: { city: { type: 'string' }, sky: { type: 'string', enum: ['sunny', 'cloudy'] } },
    required: ['city', 'sky'] };
  const p = await startProvider([
    { expect: { body: { response_format: { type: 'json_schema', json_schema: { name: 'Weather', schema: json } } } },
      respond: { content: '{"city": "Paris", "sky": "rainy"}' } },
    { expect: { messages_tail: [{ role: 'assistant' }, { role: 'user', content: { $contains: 'sky' } }] },
      respond: { content: '{"city": "Paris", "sky": "sunny"}' } },
  ]);
  try {
    const agent = new Agent({ model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, maxRetries: 0 }),
      outputType: { name: 'Weather', schema: Weather } });
    const result = await agent.run('Weather in Paris?');
    // The core refused "rainy" (the enum) before zod saw it; the second answer went through zod's parse.
    assert.deepEqual(result.structuredOutput, { city: 'Paris', sky: 'sunny', loud: 'PARIS' });
  } finally {
    p.stop();
  }
});

test('a zod schema types a tool: the core checks the call by its JSON Schema, zod parse makes what run gets', async () => {
  const { execFileSync } = require('node:child_process');
  const mcp = execFileSync('bash', [path.join(__dirname, '..', '..', 'scripts', 'mcp-servers.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const { z } = require(path.join(mcp, 'npm', 'node_modules', 'zod'));
  const { tool } = require('..');
  const Args = z.strictObject({ city: z.string(), days: z.number().int().min(1) })
    .refine((a) => a.city !== 'Atlantis', 'no such city')
    .transform((a) => ({ ...a, city: a.city.toUpperCase() }));
  const seen = [];
  const forecast = tool({ name: 'forecast', description: 'The forecast.', parameters: Args,
    run: (a) => { seen.push(a); return `${a.city}: sunny for ${a.days} days`; } });
  const p = await startProvider([
    // The wire gets zod's JSON Schema (no `$schema`); the strict object is strict mode's subset.
    { expect: { body: { tools: [{ function: { name: 'forecast', strict: true, parameters: {
      type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
      required: ['city', 'days'], additionalProperties: false, $schema: null } } }] } },
      respond: { tool_calls: [
        { id: 'c1', name: 'forecast', arguments: { city: 'paris', days: 2 } },
        // Refused by the core (days below the minimum): run never sees it.
        { id: 'c2', name: 'forecast', arguments: { city: 'oslo', days: 0 } },
        // Passes the JSON Schema, refused by zod's refinement: the call's error result.
        { id: 'c3', name: 'forecast', arguments: { city: 'Atlantis', days: 1 } },
      ] } },
    { expect: { messages_tail: [
      { role: 'tool', tool_call_id: 'c1', content: 'PARIS: sunny for 2 days' },
      { role: 'tool', tool_call_id: 'c2', content: { $contains: 'days' } },
      { role: 'tool', tool_call_id: 'c3', content: { $contains: 'no such city' } },
    ] },
      respond: { content: 'Sunny in Paris.' } },
  ]);
  try {
    const agent = new Agent({ model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, maxRetries: 0 }), tools: [forecast] });
    const result = await agent.run('Forecast for Paris?');
    assert.equal(result.output, 'Sunny in Paris.');
    assert.deepEqual(seen, [{ city: 'PARIS', days: 2 }], 'run got the parsed value, and only for the valid call');
    assert.deepEqual(result.toolCalls.map((c) => c.isError), [false, true, true]);
    assert.equal(forecast.parameters.$schema, undefined, 'the tool shows the JSON Schema it was given to the core');
  } finally {
    p.stop();
  }
});
