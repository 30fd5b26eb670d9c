'use strict';
// Skills and knowledge from Node (SPEC §14): the skills option reaches the core (the writing tools only
// when agent-managed), bad settings are refused by name; Knowledge.publish writes text up to 200 KB,
// refuses to overwrite unless asked, and every refusal is typed and names its argument. The runs
// themselves are the shared scenarios (skills_read_search_edit, knowledge_list_read).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const {
  Agent, OpenAIChat, ConfigError, Knowledge, KnowledgeError, InvalidKnowledgeArgumentError, KnowledgeExistsError, AmbitError,
} = require('..');

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-kb-'));
const model = () => new OpenAIChat('gpt-4.1', { baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k' });
const names = (agent) => agent.listTools().map((t) => t.name);

test('skills: the reading tools always, the writing ones only when agent-managed', () => {
  const dir = tmp();
  assert.deepEqual(names(new Agent({ model: model(), skills: { dirs: dir } })), ['skill_read', 'skill_search']);
  const managed = new Agent({ model: model(), skills: { dirs: [dir], agentManaged: true } });
  assert.deepEqual(names(managed), ['skill_read', 'skill_search', 'skill_write', 'skill_edit', 'skill_delete']);
  assert.deepEqual(managed.listTools().map((t) => t.level), ['read', 'read', 'workspace', 'workspace', 'workspace']);
  for (const [skills, words] of [
    [{ dirs: [dir], agentManaged: 'yes' }, 'agentManaged'],
    [{ dirs: [dir], indexEntries: -1 }, 'indexEntries'],
    [{ dirs: [dir], indexEntries: 5000 }, 'index_entries'],
    [{ dirs: [] }, 'dirs'],
    [{ dirs: [dir], colour: 1 }, 'colour'],
  ]) {
    assert.throws(() => new Agent({ model: model(), skills }), (e) => e instanceof ConfigError && e.message.includes(words), words);
  }
});

test('knowledge: publish text up to 200 KB, never overwrite unless asked, typed refusals', () => {
  const dir = path.join(tmp(), 'kb');
  const kb = new Knowledge(dir);
  const p = kb.publish('refund-policy', '# Refunds\nWithin 30 days.\n');
  assert.equal(p.name, 'refund-policy.md');
  assert.equal(p.replaced, false);
  assert.equal(fs.readFileSync(path.join(dir, 'refund-policy.md'), 'utf8'), '# Refunds\nWithin 30 days.\n');
  assert.throws(() => kb.publish('refund-policy.md', 'clobbered'), (e) => e instanceof KnowledgeExistsError && e.code === 'knowledge_exists');
  assert.equal(fs.readFileSync(path.join(dir, 'refund-policy.md'), 'utf8'), '# Refunds\nWithin 30 days.\n');
  assert.equal(kb.publish('refund-policy.md', 'v2', { overwrite: true }).replaced, true);
  kb.publish('big.txt', 'x'.repeat(200000));
  for (const [call, field] of [
    [() => kb.publish('bigger.txt', 'x'.repeat(200001)), 'content'],
    [() => kb.publish('report.pdf', '%PDF'), 'name'],
    [() => kb.publish('../escape', 'x'), 'name'],
    [() => kb.publish('lone\ud800', 'x'), 'name'],
    [() => kb.publish('ok', 'x\udfff'), 'content'],
    [() => kb.publish('ok', 'x', { overwrite: 'yes' }), 'overwrite'],
  ]) {
    assert.throws(call, (e) => e instanceof InvalidKnowledgeArgumentError && e instanceof KnowledgeError
      && e instanceof AmbitError && e.field === field && e.code === 'knowledge_invalid_argument', field);
  }
  assert.ok(!fs.existsSync(path.join(dir, 'bigger.txt')) && !fs.existsSync(path.join(dir, '..', 'escape.md')));
  assert.deepEqual(names(new Agent({ model: model(), knowledge: kb })), ['knowledge_list', 'knowledge_read']);
  assert.throws(() => new Agent({ model: model(), knowledge: { dir } }), TypeError);
  assert.throws(() => new Agent({ model: model(), knowledge: new Knowledge(dir, { inlineMaxBytes: 0 }) }),
    (e) => e instanceof ConfigError && e.message.includes('inline_max_bytes'));
});
