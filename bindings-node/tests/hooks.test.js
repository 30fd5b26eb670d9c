'use strict';
// Hooks and guardrails from Node beyond the shared scenario files (hooks_*, guardrail_* in
// scenarios.test.js): the README's example as written, what a hook sees, and the typed errors.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Agent, TestModel, Credentials, tool, ConfigError, HookFailedError, GuardrailTrippedError } = require('..');

const SECRET = 'ghp_nodeHookValue0123456789';

test("the README's hooks example runs as written", () => {
  const repo = path.resolve(__dirname, '..', '..');
  const code = execFileSync('python3', [path.join(repo, 'tests/packages/readme_block.py'), path.join(repo, 'README.md'),
    'Hooks and guardrails: your code on the way of a run', 'js', '1'], { encoding: 'utf8' });
  const file = path.join(__dirname, '.readme-hooks.js');
  fs.writeFileSync(file, code.replace("require('ambit')", "require('..')"));
  try {
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8' });
    assert.match(out, /SUNNY IN PARIS/);
    assert.match(out, /no_passwords \{ rule: 'no passwords' \}/);
  } finally {
    fs.rmSync(file, { force: true });
  }
});

test('hooks see the run context and credentials only redacted; a throwing hook is HookFailedError', async () => {
  const deploy = tool({ name: 'deploy', description: 'Deploys.', parameters: { type: 'object', properties: {} },
    credentials: ['github'], run: async (_args, ctx) => `deployed with ${await ctx.credential('github')}` });
  const seen = [];
  const points = ['run_start', 'before_model_request', 'after_model_response', 'before_tool_call', 'after_tool_call', 'run_end'];
  const build = (extra = []) => new Agent({
    model: new TestModel([{ toolCalls: [{ name: 'deploy', arguments: {} }] }, 'Done.']),
    tools: [deploy],
    credentials: new Credentials().value('github', SECRET),
    hooks: [...points.map((point) => ({ point, name: `record_${point}`, run: (ctx, p) => { seen.push([point, ctx.context.user, JSON.stringify(p)]); } })), ...extra],
  });
  const result = await build().run('Deploy.', { context: { user: 'ada' } });
  assert.equal(result.toolCalls[0].result, 'deployed with [credential:github]');
  assert.deepEqual(seen.map(([p]) => p), ['run_start', 'before_model_request', 'after_model_response', 'before_tool_call',
    'after_tool_call', 'before_model_request', 'after_model_response', 'run_end']);
  assert.ok(seen.every(([, user]) => user === 'ada'));
  const everything = seen.map(([, , p]) => p).join('');
  assert.ok(everything.includes('deployed with [credential:github]'));
  assert.ok(!everything.includes(SECRET), 'a hook saw the credential value');
  const boom = { point: 'after_tool_call', name: 'exploding', run: async () => { throw new Error('boom'); } };
  await assert.rejects(build([boom]).run('Deploy.', { context: { user: 'ada' } }), (e) => {
    assert.ok(e instanceof HookFailedError, String(e));
    assert.equal(e.hook, 'exploding');
    assert.equal(e.point, 'after_tool_call');
    return true;
  });
});

test('guardrails and hook points are checked', async () => {
  const agent = new Agent({ model: new TestModel(['The secret is 42.']),
    outputGuardrails: [{ name: 'no_secrets', run: async (_ctx, p) => ({ tripped: p.output.includes('secret'), info: ['secret'] }) }] });
  await assert.rejects(agent.run('Tell me.'), (e) => {
    assert.ok(e instanceof GuardrailTrippedError);
    assert.deepEqual([e.guardrail, e.kind, e.verdict], ['no_secrets', 'output', ['secret']]);
    return true;
  });
  assert.throws(() => new Agent({ model: new TestModel(['x']), hooks: [{ point: 'before_lunch', run: () => {} }] }), ConfigError);
});
