'use strict';
// Images and files in and out (issue 17, part 3) through the typed API: a run's input as parts (`Text`,
// `Image` from a Buffer, `File` from a Uint8Array), a tool returning an `Image`, and each bad part
// refused by name before anything is sent. (The scenario files `parts_input_*` and `tool_image_*` run in
// scenarios.test.js too.)

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startLineServer, providerPath } = require('./support.js');
const { Agent, Anthropic, OpenAIChat, Text, Image, File, InvalidMessageError, tool } = require('..');

const SCENARIOS = path.join(__dirname, '..', '..', 'tests', 'scenarios');
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC',
  'base64',
);
const PDF = new Uint8Array(Buffer.from('%PDF-1.4\n%%EOF\n'));

/** The provider serving exchanges written to a file of their own, on `wire`. */
async function scripted(name, wire, exchanges) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-media-')), `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ name, wire, exchanges }));
  const { url, stop } = await startLineServer(providerPath(), ['--exit-on-eof', file]);
  const state = async () => (await fetch(url.replace(/\/v1$/, '/__ambit/state'))).json();
  return { baseUrl: url, stop, state };
}

async function provider(file) {
  const { url, stop } = await startLineServer(providerPath(), ['--exit-on-eof', path.join(SCENARIOS, file)]);
  const state = async () => (await fetch(url.replace(/\/v1$/, '/__ambit/state'))).json();
  return { baseUrl: url, stop, state };
}

test('typed parts reach the Anthropic wire in its blocks, and the result keeps them', async () => {
  const p = await provider('parts_input_anthropic.json');
  try {
    const agent = new Agent({
      model: new Anthropic('claude-sonnet-4-5', { baseUrl: p.baseUrl, apiKey: 'sk-ant-test-ambit' }),
    });
    const result = await agent.run([
      new Text('What do these show?'),
      Image.fromBytes(PNG),
      File.fromBytes(PDF, 'application/pdf', 'report.pdf'),
      File.fromBytes(Buffer.from('meeting at noon'), 'text/plain', 'notes.txt'),
      Image.fromUrl('https://example.com/cat.png'),
    ]);
    assert.equal(result.output, 'A green dot, a report, a note and a cat.');
    const state = await p.state();
    assert.equal(state.served, 1);
    assert.deepEqual(state.mismatches, []);
    assert.deepEqual(result.messages[0].parts.map((x) => x.type), ['text', 'image', 'file', 'file', 'image_url']);
  } finally {
    p.stop();
  }
});

test('a PNG labelled JPEG, and an oversized image, are refused naming the part', async () => {
  const p = await provider('parts_input_chat.json');
  try {
    const agent = new Agent({ model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, apiKey: 'sk-test-ambit' }) });
    await assert.rejects(agent.run([new Text('hi'), Image.fromBytes(PNG, 'image/jpeg')]), (e) => {
      assert.ok(e instanceof InvalidMessageError);
      assert.equal(e.field, 'parts[1]');
      assert.match(e.message, /messages\[0\]\.parts\[1\]: labelled image\/jpeg, but the bytes are image\/png/);
      return true;
    });
    const big = Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024)]);
    await assert.rejects(agent.run(['look', Image.fromBytes(big)]), /parts\[1\]: image is \d+ bytes, over the 5242880-byte cap/);
    assert.equal((await p.state()).served, 0);
  } finally {
    p.stop();
  }
});

test('a tool returning an Image reaches the model in a tool_result block', async () => {
  const p = await provider('tool_image_anthropic.json');
  try {
    const render = tool({
      name: 'render_chart',
      description: "Renders a chart of a city's weather.",
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      run: ({ city }) => [new Text(`chart of ${city}`), Image.fromBytes(new Uint8Array(PNG))],
    });
    const agent = new Agent({
      model: new Anthropic('claude-sonnet-4-5', { baseUrl: p.baseUrl, apiKey: 'sk-ant-test-ambit' }),
      tools: [render],
    });
    const result = await agent.run('Show me the weather chart for Paris.');
    assert.equal(result.output, 'The chart shows one green pixel.');
    assert.equal(result.toolCalls[0].result, 'chart of Paris\n[image image/png, 69 bytes]');
    assert.deepEqual((await p.state()).mismatches, []);
  } finally {
    p.stop();
  }
});

test('image_render is offered only with vision: true, and shows the model the image', async () => {
  const png = PNG.toString('base64');
  const p = await scripted('image_render', 'anthropic', [
    {
      expect: { tool_names: ['image_render'] },
      respond: { tool_calls: [{ id: 'toolu_r', name: 'image_render', arguments: { base64: png } }] },
    },
    {
      expect: {
        messages_tail: [{
          role: 'user',
          content: [{
            type: 'tool_result',
            tool_use_id: 'toolu_r',
            content: [
              { type: 'text', text: 'Rendered the image from the base64 (image/png, 69 bytes).' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
            ],
          }],
        }],
      },
      respond: { content: 'One green pixel.' },
    },
  ]);
  try {
    const model = new Anthropic('claude-sonnet-4-5', { baseUrl: p.baseUrl, apiKey: 'k' });
    assert.ok(!new Agent({ model }).listTools().some((t) => t.name === 'image_render'));
    const result = await new Agent({ model, vision: true }).run('Show me the frame.');
    assert.equal(result.output, 'One green pixel.');
    assert.deepEqual((await p.state()).mismatches, []);
  } finally {
    p.stop();
  }
});

test('a session turn of parts is sent again from a new store handle; a refused part stores nothing', async () => {
  const { Sessions, ConfigError } = require('..');
  const url = `data:image/png;base64,${PNG.toString('base64')}`;
  const image = { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url } }] };
  const p = await scripted('node_session_parts', 'openai_chat', [
    { expect: { messages_count: 1, messages_tail: [image] }, respond: { content: 'A dot.' } },
    {
      expect: { messages_count: 3, messages_tail: [image, { role: 'assistant' }, { role: 'user', content: 'Which colour?' }] },
      respond: { content: 'Green.' },
    },
  ]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-session-parts-'));
  try {
    const agent = new Agent({ model: new OpenAIChat('gpt-4.1', { baseUrl: p.baseUrl, apiKey: 'sk-test-ambit' }) });
    const store = `sqlite://${path.join(dir, 'sessions.db')}`;
    const first = await Sessions.open(store);
    const sid = await first.create();
    await assert.rejects(
      first.run(agent, sid, ['hi', Image.fromBytes(PNG, 'image/jpeg')]),
      (e) => e instanceof InvalidMessageError && e.field === 'parts[1]' &&
        e.message.includes('labelled image/jpeg, but the bytes are image/png'),
    );
    await assert.rejects(first.run(agent, sid, [{ role: 'user', content: 'hi' }]),
      (e) => e instanceof ConfigError && e.message.includes('a session keeps its own history'));
    assert.deepEqual(await first.entries(sid), []);
    assert.equal((await p.state()).served, 0);
    assert.equal((await first.run(agent, sid, [new Text('What is this?'), Image.fromBytes(PNG)])).output, 'A dot.');
    const second = await Sessions.open(store);
    assert.equal((await second.run(agent, sid, 'Which colour?')).output, 'Green.');
    const state = await p.state();
    assert.deepEqual(state.mismatches, []);
    assert.equal(state.served, 2);
    const sent = state.requests.map((r) => r.body.messages[0].content[1].image_url.url);
    assert.deepEqual(sent, [url, url]);
  } finally {
    p.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
