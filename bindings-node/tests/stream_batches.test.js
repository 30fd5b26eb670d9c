'use strict';
// A stream's events cross to JS in batches (`NativeRunStream.next`): many large events (tool results of
// megabytes) cross in batches of about 1 MiB of JSON text, never as one string past V8's limit, and every
// event arrives, in order; one event too large for a JS string alone ends the stream with
// EventTooLargeError naming its size, after every event before it.
// Needs the test build (`scripts/test-node.sh`: cargo feature test-hooks) for `_testingSetMaxEventText`.

const { test } = require('node:test');
const assert = require('node:assert/strict');

const ambit = require('..');
const native = require('../native.js');
const { Agent, tool, FunctionModel, EventTooLargeError } = ambit;

const BIG = 2 * 1024 * 1024;
const CALLS = 8;

/** A tool whose result for `{n}` is `n:` and BIG bytes. */
function bigResult(n, bytes = BIG) {
  return `${n}:${'x'.repeat(bytes)}`;
}

/** A model that calls `big` CALLS times at once, then answers "done"; `asked` resolves when it is asked again. */
function bigModel() {
  let asked;
  const askedAgain = new Promise((resolve) => {
    asked = resolve;
  });
  const model = new FunctionModel((request) => {
    if (request.index === 1) {
      return { toolCalls: Array.from({ length: CALLS }, (_, n) => ({ name: 'big', arguments: { n } })) };
    }
    asked();
    return 'done';
  });
  return { model, askedAgain };
}

test('a streamed run whose tool returns megabytes: every event arrives, in order, intact', async () => {
  const big = tool({
    name: 'big',
    description: 'A large result.',
    parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    run: ({ n }) => bigResult(n),
  });
  const agent = new Agent({ model: bigModel().model, tools: [big] });
  const events = [];
  for await (const event of agent.stream('go')) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'run_started');
  assert.equal(types.at(-1), 'run_finished');
  assert.equal(events.at(-1).result.output, 'done');
  // Each call's events in their order: requested, started, finished; the second model request after all.
  const at = (type, id) => events.findIndex((e) => e.type === type && e.id === id);
  const finished = events.filter((e) => e.type === 'tool_finished');
  assert.equal(finished.length, CALLS);
  for (const e of finished) {
    assert.ok(at('tool_call_requested', e.id) < at('tool_started', e.id), e.id);
    assert.ok(at('tool_started', e.id) < at('tool_finished', e.id), e.id);
    assert.ok(at('tool_finished', e.id) < types.lastIndexOf('model_request'), e.id);
    const n = Number(e.result.split(':')[0]);
    assert.equal(e.result, bigResult(n), `call ${e.id}'s result arrives whole`);
  }
  assert.deepEqual(finished.map((e) => Number(e.result.split(':')[0])).sort((a, b) => a - b), [...Array(CALLS).keys()]);
  assert.deepEqual(
    types.filter((t) => t === 'model_request' || t === 'model_response'),
    ['model_request', 'model_response', 'model_request', 'model_response'],
  );
});

// Negative control: with the byte bound off (STREAM_BATCH_BYTES = usize::MAX in bindings-node/src/lib.rs),
// the first batch read after the run asked its model again held all eight results (16 MiB in one string).
// (The control relies on the feed's task having moved those events into the feed before the first
// `next`, which it does at once but which nothing here waits for: the bound itself is checked whatever
// the timing; only the control could, on a very slow machine, pass without the bound.)
test('events waiting in the feed cross in batches of about 1 MiB of text, never all at once', async () => {
  const { model, askedAgain } = bigModel();
  const big = {
    name: 'big',
    description: 'A large result.',
    parameters: JSON.stringify({ type: 'object', properties: { n: { type: 'integer' } } }),
    call: (request) => JSON.stringify({ ok: true, value: bigResult(JSON.parse(request).arguments.n) }),
  };
  const agent = native.createAgent({ model: model.toNative() }, [big]);
  const feed = agent.stream('go');
  // Nothing is read until the run has finished its calls: their events wait in the feed. (Only a pending
  // `next` keeps the process alive for a run; meanwhile a timer does, never firing.)
  const alive = setInterval(() => {}, 1 << 30);
  try {
    await askedAgain;
  } finally {
    clearInterval(alive);
  }
  const batches = [];
  for (let text = await feed.next(); text !== '[]'; text = await feed.next()) batches.push(text);
  const envelopes = batches.flatMap((text) => JSON.parse(text));
  assert.ok(envelopes.every((e) => e.ok), 'the run succeeds');
  const finished = envelopes.filter((e) => e.event.type === 'tool_finished');
  assert.equal(finished.length, CALLS, 'every result arrives');
  assert.equal(envelopes.at(-1).event.type, 'run_finished');
  for (const text of batches) {
    const batch = JSON.parse(text);
    const inBatch = batch.filter((e) => e.event.type === 'tool_finished').length;
    // A batch stops taking events once its text passes 1 MiB: each 2 MiB result ends its batch, and what
    // comes before a batch's last event is under 1 MiB (run_finished, which carries the conversation,
    // is one event of over 16 MiB: alone or last).
    assert.ok(inBatch <= 1, `a batch of ${text.length} characters holds ${inBatch} results`);
    const before = text.length - JSON.stringify(batch.at(-1)).length;
    assert.ok(before <= 1024 * 1024 + 4096, `a batch has ${before} characters before its last event`);
  }
});

test('an event too large for a JS string ends the stream with EventTooLargeError, after the events before it', async () => {
  // The test build's lower limit stands for V8's (2^29 - 24 characters): the same path, without 512 MiB.
  native._testingSetMaxEventText(100_000);
  try {
    const model = new FunctionModel((request) =>
      request.index === 1 ? { toolCalls: [{ name: 'big', arguments: { n: 7 } }] } : 'done',
    );
    const big = tool({
      name: 'big',
      description: 'A large result.',
      parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
      run: ({ n }) => bigResult(n, 200_000),
    });
    const agent = new Agent({ model, tools: [big] });
    const events = [];
    await assert.rejects(
      (async () => {
        for await (const event of agent.stream('go')) events.push(event);
      })(),
      (e) => {
        assert.ok(e instanceof EventTooLargeError, e.stack);
        assert.equal(e.code, 'event_too_large');
        assert.equal(e.event, 'tool_finished');
        assert.equal(e.limit, 100_000);
        assert.ok(e.size > 200_000, `size ${e.size}`);
        assert.match(e.message, /tool_finished event is too large for a JavaScript string: its JSON text is \d+ characters/);
        return true;
      },
    );
    // Nothing before it is lost.
    assert.deepEqual(events.map((e) => e.type), [
      'run_started',
      'model_request',
      'model_response',
      'tool_call_requested',
      'tool_started',
    ]);
  } finally {
    native._testingSetMaxEventText(0);
  }
});

// A failed run's error whose text is too long for a JS string keeps its own code (its message is
// shortened), in a stream and from `run`. Negative control: with `encode_item` treating an error like an
// event, the stream's error became EventTooLargeError ("event_too_large" !== the model's code).
test('a run error too long for a JS string keeps its code, shortened', async () => {
  const failing = (text) => new FunctionModel(() => {
    throw new Error(text);
  });
  // The code of the same error, short.
  let code;
  await assert.rejects(new Agent({ model: failing('short') }).run('go'), (e) => {
    code = e.code;
    return true;
  });
  assert.ok(code && code !== 'event_too_large', code);
  native._testingSetMaxEventText(100_000);
  try {
    const long = 'y'.repeat(200_000);
    const agent = new Agent({ model: failing(long) });
    const check = (e) => {
      assert.ok(!(e instanceof EventTooLargeError), e.stack);
      assert.equal(e.code, code);
      assert.match(e.message, /shortened: the error's text is \d+ bytes, too long for a JavaScript string/);
      assert.ok(e.message.length < 100_000, `${e.message.length}`);
      return true;
    };
    await assert.rejects((async () => {
      for await (const _ of agent.stream('go'));
    })(), check);
    await assert.rejects(agent.run('go'), check);
  } finally {
    native._testingSetMaxEventText(0);
  }
});

// `run` (without a signal: the native run, not the stream) whose result's text would not fit in a JS
// string rejects with EventTooLargeError naming the size, not napi's untyped Error. Negative control:
// without the check in `NativeAgent.run`, the test build's lower limit did not apply and the run
// resolved (with V8's real limit, napi's "Failed to convert rust `String` into napi `string`").
test('a run result too large for a JS string is EventTooLargeError', async () => {
  native._testingSetMaxEventText(100_000);
  try {
    const agent = new Agent({ model: new FunctionModel(() => 'z'.repeat(200_000)) });
    await assert.rejects(agent.run('go'), (e) => {
      assert.ok(e instanceof EventTooLargeError, e.stack);
      assert.equal(e.event, 'run result');
      assert.equal(e.limit, 100_000);
      assert.ok(e.size > 200_000, `size ${e.size}`);
      assert.match(e.message, /the run result is too large for a JavaScript string/);
      return true;
    });
  } finally {
    native._testingSetMaxEventText(0);
  }
  // With V8's own limit, the same run succeeds.
  const ok = await new Agent({ model: new FunctionModel(() => 'z'.repeat(200_000)) }).run('go');
  assert.equal(ok.output.length, 200_000);
});
