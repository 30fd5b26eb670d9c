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

test('an MCP server gets its credentials as headers and env, and the model gets none', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { Credentials } = require('..');
  const { startLineServer, startScriptedProvider } = require('./support.js');
  const GITHUB = 'ghp_NodeMcpBearerToken0123456789';
  const API = 'api-key-node-mcp-7c1d2e3f';
  const STATIC = 'static-node-header-91ab';
  const py = process.env.AMBIT_PY || 'python3';
  const quoting = await startLineServer(py, [path.join(__dirname, '..', '..', 'tests', 'mcp', 'quoting_server.py')]);
  const provider = await startScriptedProvider('mcp-credentials', [
    { respond: { tool_calls: [{ id: 'c1', name: 'mcp_list_all', arguments: {} }] } },
    { respond: { content: 'done' } },
  ]);
  try {
    const dump = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ambit-node-mcp-')), 'env.txt');
    const agent = new Agent({
      model: new OpenAIChat('gpt-4.1', { baseUrl: provider.baseUrl, apiKey: 'sk-test' }),
      mcpServers: [
        McpServer.http('remote', quoting.url, { bearer: 'github', credentialHeaders: { 'X-Api-Key': 'api' }, headers: { 'X-Static-Key': STATIC } }),
        McpServer.stdio('envdump', '/bin/sh', ['-c', `printf '%s' "$MCP_TOKEN" > '${dump}'; exit 1`], { credentialEnv: { MCP_TOKEN: 'github' } }),
      ],
      deferral: { setting: 'eager' },
      credentials: new Credentials().value('api', API).callback('github', async () => GITHUB),
    });
    const result = await agent.run('list everything');
    const seen = await (await fetch(quoting.url.replace(/\/mcp$/, '/seen'))).json();
    assert.equal(seen[0].authorization, `Bearer ${GITHUB}`);
    assert.deepEqual([seen[0]['x-api-key'], seen[0]['x-static-key']], [API, STATIC]);
    assert.equal(fs.readFileSync(dump, 'utf8'), GITHUB);
    const reached = JSON.stringify((await provider.state()).requests) + result.toolCalls[0].result;
    for (const value of [GITHUB, API, STATIC]) assert.ok(!reached.includes(value), `${value} reached the model: ${reached}`);
    // The control that the server's quote reached the model at all: redacted, by alias.
    assert.ok(reached.includes('remote') && reached.includes('[credential:github]'), reached);
  } finally {
    quoting.stop();
    provider.stop();
  }
});

test('MCP credential settings are checked by name', () => {
  assert.throws(() => new Agent({ model: model(), mcpServers: [McpServer.http('h', 'http://127.0.0.1:1/mcp', { credentialHeaders: 'api' })] }), (e) => e instanceof TypeError && /mcpServers\[0\]\.credentialHeaders must be an object/.test(e.message));
  assert.throws(
    () => new Agent({ model: model(), mcpServers: [{ name: 's', transport: { type: 'stdio', command: 'x' }, bearer: 'github' }] }),
    (e) => e instanceof ConfigError && /HTTP server, not stdio/.test(e.message),
  );
});
