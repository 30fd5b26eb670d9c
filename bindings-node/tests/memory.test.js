'use strict';
// Memory from Node, on SQLite (and PostgreSQL when the suite has a server): remember -> recall ->
// forget -> list -> export, a key updated in place, typed refusals naming the field, and an agent given a
// memory store gets the memory tools (and one without, none).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Agent, OpenAIChat, Memory, MemoryError, InvalidMemoryArgumentError, AmbitError } = require('..');

const sqliteUrl = () => `sqlite://${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-memory-')), 'memory.db')}`;
const urls = () => [sqliteUrl(), ...(process.env.AMBIT_TEST_POSTGRES_URL ? [process.env.AMBIT_TEST_POSTGRES_URL] : [])];

test('remember, recall, forget, list and export', async () => {
  for (const url of urls()) {
    const memory = await Memory.open(url);
    const agent = `node-${process.pid}-${url.length}`; // PostgreSQL is shared by the suites
    const saved = await memory.remember(agent, {
      body: 'Refunds over 500 EUR need a second approver from finance.',
      title: 'Refund limit',
      kind: 'instruction',
      tags: 'Billing',
      salience: 8,
    });
    assert.equal(saved.created, true);
    assert.deepEqual(saved.memory.tags, ['billing']);
    assert.equal(typeof saved.memory.createdAt, 'number');
    const other = await memory.remember(agent, { body: 'The office wifi is Acme-Guest.', key: 'wifi' });
    assert.deepEqual((await memory.recall(agent, { query: 'who approves large refunds' })).map((m) => m.id), [saved.memory.id]);
    assert.deepEqual((await memory.recall(agent)).map((m) => m.id), [saved.memory.id, other.memory.id]);
    assert.deepEqual((await memory.recall(agent, { tags: ['billing'], kind: 'instruction' })).map((m) => m.id), [saved.memory.id]);
    const updated = await memory.remember(agent, { key: 'wifi', salience: 9 });
    assert.equal(updated.created, false);
    assert.equal(updated.memory.id, other.memory.id);
    assert.equal(updated.memory.body, 'The office wifi is Acme-Guest.');
    assert.deepEqual((await memory.list(agent)).map((m) => m.id), [saved.memory.id, other.memory.id]);
    const exported = JSON.parse(await memory.export(agent));
    assert.equal(exported.version, 1);
    assert.equal(exported.memories.length, 2);
    assert.equal(await memory.forget(agent, { key: 'wifi' }), true);
    assert.equal(await memory.forget(agent, { id: other.memory.id }), false);
    assert.equal(await memory.forget(agent, { id: saved.memory.id }), true);
    assert.deepEqual(await memory.list(agent), []);
  }
});

test('refusals are typed and name the field', async () => {
  const memory = await Memory.open(sqliteUrl());
  for (const [fields, field] of [
    [{ body: 'x'.repeat(8193) }, 'body'],
    [{ body: 'b', title: 't'.repeat(201) }, 'title'],
    [{ body: 'b', salience: 11 }, 'salience'],
    [{ body: 'b', tags: ['x'.repeat(65)] }, 'tags'],
    [{ body: 'b', colour: 'red' }, 'colour'],
    [{ body: 'b', salience: 2 ** 80 }, 'salience'],
    [{ body: 'b', kind: 'rumour' }, 'kind'],
  ]) {
    await assert.rejects(memory.remember('a', fields), (e) => {
      assert.ok(e instanceof InvalidMemoryArgumentError && e instanceof MemoryError && e instanceof AmbitError, String(e));
      assert.equal(e.code, 'memory_invalid_argument');
      assert.equal(e.field, field, e.message);
      return true;
    });
  }
  // Negative control: at the limits it is accepted.
  await memory.remember('a', { body: 'x'.repeat(8192), title: 't'.repeat(200), salience: 10, tags: ['x'.repeat(64)] });
  await assert.rejects(memory.recall('a', { limit: 51 }), (e) => e.field === 'limit');
  await assert.rejects(memory.forget('a', {}), (e) => e.code === 'memory_invalid_argument');
  await assert.rejects(Memory.open('mysql://nope'), (e) => e instanceof InvalidMemoryArgumentError && e.field === 'url');
  // Out of range or negative: the typed refusal naming the argument, never a saturated or truncated id
  // (1.5 was read as 1 and forgot memory #1) and never the default limit.
  for (const [call, field] of [
    [() => memory.forget('a', { id: 2 ** 70 }), 'id'],
    [() => memory.forget('a', { id: 1.5 }), 'id'],
    [() => memory.forget('a', { id: -Infinity }), 'id'],
    [() => memory.recall('a', { limit: -1 }), 'limit'],
  ]) {
    await assert.rejects(call(), (e) => e instanceof InvalidMemoryArgumentError && e.field === field, field);
  }
  // Control: an id in range is taken (the memory stays: no such id).
  assert.equal(await memory.forget('a', { id: 2 ** 52 }), false);
  assert.equal((await memory.recall('a', { limit: 1 })).length, 1);
});

test('an agent has the memory tools only with memory', async () => {
  const memory = await Memory.open(sqliteUrl());
  const model = new OpenAIChat('gpt-4.1');
  const names = new Agent({ model, memory, agentName: 'bot' }).listTools().map((t) => t.name);
  assert.deepEqual(names, ['memory_recall', 'memory_caller_context', 'memory_remember', 'memory_forget', 'memory_record_preference']);
  assert.deepEqual(new Agent({ model }).listTools().filter((t) => t.name.startsWith('memory_')), []);
  assert.throws(() => new Agent({ model, memory }), TypeError);
  assert.throws(() => new Agent({ model, memory: 'sqlite:///tmp/x.db', agentName: 'bot' }), TypeError);
  assert.throws(() => new Agent({ model, memory, agentName: ' ' }), (e) => e.code === 'config');
});
