'use strict';
// MCP and deferral settings from Node: what the core refuses, and how the listing shows deferral.
// (The scenario mcp_deferred_tools runs an agent against the real server-everything.)

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { Agent, OpenAIChat, McpServer, ConfigError, tool, wireName } = require('..');

const weather = tool({ name: 'weather', description: 'Current weather.', parameters: { type: 'object', properties: {} }, run: async () => 'sunny', level: 'read' });
const forecast = tool({ name: 'forecast', description: 'Tomorrow.', parameters: { type: 'object', properties: {} }, run: async () => 'rain', level: 'read' });
const model = () => new OpenAIChat('gpt-4.1');

test('a bad server name, setting or key is a ConfigError naming it', () => {
  assert.throws(() => new Agent({ model: model(), mcpServers: [McpServer.stdio('no spaces', 'node')] }), (e) => e instanceof ConfigError && /MCP server name 'no spaces'/.test(e.message));
  assert.throws(() => new Agent({ model: model(), deferral: { setting: 'lazy' } }), (e) => e instanceof ConfigError && /lazy/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: [{ ...McpServer.http('docs', 'http://127.0.0.1:1/mcp'), trustd: true }] }), (e) => e instanceof ConfigError && /trustd/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: 'node server.js' }), TypeError);
});

test('wireName is the name the model sees for a tool', () => {
  assert.equal(wireName('get_weather'), 'get_weather');
  const long = 'mcp__github__' + 'list_pull_requests_'.repeat(4);
  const short = wireName(long);
  assert.equal(short.length, 64);
  assert.ok(short.startsWith(long.slice(0, 51) + '_'));
  assert.equal(wireName(long, 128), long);
  assert.equal(wireName('files.read'), wireName('files.read', 64));
  assert.match(wireName('files.read'), /^files_read_[0-9a-f]{12}$/);
});

test('the listing shows deferred and hidden host tools', () => {
  const statuses = (deferral) => new Agent({ model: model(), tools: [weather, forecast], deferral }).listTools().map((t) => [t.name, t.status]);
  assert.deepEqual(statuses({ deferrableTools: ['forecast'] }), [['weather', 'offered'], ['forecast', 'deferred']]);
  assert.deepEqual(statuses({ setting: 'hidden', deferrableTools: ['forecast'] }), [['weather', 'offered'], ['forecast', 'hidden']]);
  assert.deepEqual(statuses({ strategy: 'eager', deferrableTools: ['forecast'] }), [['weather', 'offered'], ['forecast', 'offered']]);
});

test('server helpers make plain data; a server that cannot start is no configuration error', () => {
  assert.deepEqual(McpServer.stdio('fs', 'npx', ['-y', 'server'], { env: { A: '1' }, trusted: true, eagerLoadTools: ['read'] }), {
    name: 'fs',
    transport: { type: 'stdio', command: 'npx', args: ['-y', 'server'], env: { A: '1' } },
    trusted: true,
    eagerLoadTools: ['read'],
  });
  new Agent({ model: model(), mcpServers: [McpServer.stdio('gone', '/nonexistent/server')] });
});

test('refreshTools lists a real server before a run', async () => {
  const path = require('node:path');
  const { execFileSync } = require('node:child_process');
  const dir = execFileSync('bash', [path.join(__dirname, '..', '..', 'scripts', 'mcp-servers.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  const js = path.join(dir, 'npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  const agent = new Agent({
    model: model(),
    mcpServers: [McpServer.stdio('everything', 'node', [js, 'stdio'], { levels: { echo: 'read' }, eagerLoadTools: ['get-sum'] }), McpServer.stdio('gone', '/nonexistent/server')],
  });
  // Before: only the seven resource and prompt meta-tools; the servers' tools once they are listed.
  assert.deepEqual(agent.listTools().map((t) => t.name), ['mcp_resource_list', 'mcp_resource_template_list', 'mcp_resource_read', 'mcp_prompt_list', 'mcp_prompt_get', 'mcp_list_all', 'mcp_resource_read_any']);
  await agent.refreshTools();
  const byName = Object.fromEntries(agent.listTools().map((t) => [t.name, t]));
  assert.deepEqual([byName['mcp__everything__echo'].status, byName['mcp__everything__echo'].level], ['deferred', 'read']);
  assert.deepEqual([byName['mcp__everything__get-sum'].status, byName['mcp__everything__get-sum'].level], ['offered', 'unrestricted']);
  assert.equal(byName.mcp_prompt_get.status, 'deferred');
  assert.ok(!Object.keys(byName).some((n) => n.startsWith('mcp__gone__')));
});
