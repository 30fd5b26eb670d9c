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

test('an OAuth MCP server: one consent, elicitation, tokens in the host store and never in the model', async () => {
  const path = require('node:path');
  const { execFileSync } = require('node:child_process');
  const { Credentials } = require('..');
  const { startLineServer, startScriptedProvider } = require('./support.js');
  const root = path.join(__dirname, '..', '..');
  const dir = execFileSync('bash', [path.join(root, 'scripts', 'mcp-servers.sh')], { encoding: 'utf8' }).trim();
  const server = await startLineServer(path.join(dir, 'venv', 'bin', 'python'), [path.join(root, 'tests', 'mcp', 'oauth_server.py')]);
  const provider = await startScriptedProvider('mcp-oauth', [
    { respond: { tool_calls: [{ id: 'c1', name: 'mcp__notes__whoami', arguments: {} }] } },
    { respond: { tool_calls: [{ id: 'c2', name: 'mcp__notes__ask_name', arguments: {} }] } },
    { respond: { content: 'done' } },
  ]);
  // The consent step of a logged-in user who agrees: follow the URL, not its redirect.
  const consents = [];
  const onAuthorize = async (url) => {
    consents.push(url);
    const resp = await fetch(url, { redirect: 'manual' });
    return resp.headers.get('location');
  };
  const saved = new Map();
  const tokenStore = { load: (k) => saved.get(k) ?? null, save: (k, v) => { saved.set(k, v); }, clear: (k) => { saved.delete(k); } };
  const asked = [];
  try {
    const agent = new Agent({
      model: new OpenAIChat('gpt-4.1', { baseUrl: provider.baseUrl, apiKey: 'sk-test' }),
      mcpServers: [McpServer.http('notes', server.url, {
        oauth: { clientName: 'ambit-node', redirectUri: 'http://127.0.0.1:1/callback', onAuthorize, tokenStore },
        onElicit: async (request) => { asked.push(request); return { name: 'Ada' }; },
      })],
      deferral: { setting: 'eager' },
    });
    const result = await agent.run('who am I?');
    assert.equal(result.output, 'done');
    assert.equal(consents.length, 1);
    const query = new URL(consents[0]).searchParams;
    assert.deepEqual([query.get('code_challenge_method'), query.get('resource')], ['S256', server.url]);
    assert.ok(result.toolCalls[0].result.includes('"scopes": ["notes:read"]'), result.toolCalls[0].result);
    assert.ok(result.toolCalls[1].result.startsWith('hello Ada'), result.toolCalls[1].result);
    assert.deepEqual(asked.map((r) => [r.server, r.mode, r.message]), [['notes', 'form', 'What is your name?']]);
    const token = JSON.parse(saved.get(server.url)).token_response.access_token;
    assert.ok(token.startsWith('at-'));
    const reached = JSON.stringify((await provider.state()).requests) + JSON.stringify(result.toolCalls);
    assert.ok(!reached.includes(token));

    // Controls: a bearer token the server never issued is refused; no elicitation handler: declined.
    const wrong = new Agent({
      model: model(),
      mcpServers: [McpServer.http('notes', server.url, { bearer: 'wrong' })],
      credentials: new Credentials().value('wrong', 'at-never-issued-by-this-server'),
    });
    await wrong.refreshTools();
    assert.ok(!wrong.listTools().some((t) => t.name.startsWith('mcp__notes__')));
    const second = await startScriptedProvider('mcp-oauth-2', [
      { respond: { tool_calls: [{ id: 'c1', name: 'mcp__notes__ask_name', arguments: {} }] } },
      { respond: { content: 'done' } },
    ]);
    try {
      const plain = new Agent({
        model: new OpenAIChat('gpt-4.1', { baseUrl: second.baseUrl, apiKey: 'sk-test' }),
        mcpServers: [McpServer.http('notes', server.url, { oauth: { redirectUri: 'http://127.0.0.1:1/callback', onAuthorize, tokenStore } })],
        deferral: { setting: 'eager' },
      });
      const declined = await plain.run('ask');
      assert.ok(declined.toolCalls[0].result.startsWith('no name: decline'), declined.toolCalls[0].result);
    } finally {
      second.stop();
    }
  } finally {
    server.stop();
    provider.stop();
  }
});

test('OAuth settings are checked by name', () => {
  const http = (options) => McpServer.http('h', 'http://127.0.0.1:1/mcp', options);
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ oauth: { onAuthorize: async (u) => u } })] }), (e) => e instanceof ConfigError && /oauth\.redirect_uri is required/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ oauth: { redirectUri: 'http://x/cb', tokenStore: {} } })] }), (e) => e instanceof TypeError && /oauth\.tokenStore must be a path or have load, save and clear/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ onElicit: 5 })] }), (e) => e instanceof TypeError && /onElicit must be a function/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ oauth: { grant: 'client_credentials' } })] }), (e) => e instanceof ConfigError && /oauth\.client_id is required/.test(e.message));
  // The authorization-server pin: https (or loopback http) only, named by the core.
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ oauth: { redirectUri: 'http://x/cb', onAuthorize: async (u) => u, issuer: 'http://as.example' } })] }), (e) => e instanceof ConfigError && /oauth\.issuer: refused http:\/\/as\.example\/: plain http/.test(e.message));
  new Agent({ model: model(), mcpServers: [http({ oauth: { redirectUri: 'http://x/cb', onAuthorize: async (u) => u, issuer: 'https://as.example' } })] });
  // The bound on the wait for the refresh guard (seconds): a positive number.
  assert.throws(() => new Agent({ model: model(), mcpServers: [http({ oauth: { redirectUri: 'http://x/cb', refreshLockTimeout: 0 } })] }), (e) => e instanceof TypeError && /oauth\.refreshLockTimeout must be a positive number of seconds/.test(e.message));
  new Agent({ model: model(), mcpServers: [http({ oauth: { redirectUri: 'http://x/cb', onAuthorize: async (u) => u, refreshLockTimeout: 0.25 } })] });
});
