'use strict';
// MCP and deferral settings from Node: what the core refuses, and how the listing shows deferral.
// (The scenario mcp_deferred_tools runs an agent against the real server-everything.)

const { test } = require('node:test');
const assert = require('node:assert/strict');

const { Agent, OpenAIChat, McpServer, ConfigError, tool } = require('..');

const weather = tool({ name: 'weather', description: 'Current weather.', parameters: { type: 'object', properties: {} }, run: async () => 'sunny', level: 'read' });
const forecast = tool({ name: 'forecast', description: 'Tomorrow.', parameters: { type: 'object', properties: {} }, run: async () => 'rain', level: 'read' });
const model = () => new OpenAIChat('gpt-4.1');

test('a bad server name, setting or key is a ConfigError naming it', () => {
  assert.throws(() => new Agent({ model: model(), mcpServers: [McpServer.stdio('no spaces', 'node')] }), (e) => e instanceof ConfigError && /MCP server name 'no spaces'/.test(e.message));
  assert.throws(() => new Agent({ model: model(), deferral: { setting: 'lazy' } }), (e) => e instanceof ConfigError && /lazy/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: [{ ...McpServer.http('docs', 'http://127.0.0.1:1/mcp'), trustd: true }] }), (e) => e instanceof ConfigError && /trustd/.test(e.message));
  assert.throws(() => new Agent({ model: model(), mcpServers: 'node server.js' }), TypeError);
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
