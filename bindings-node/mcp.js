'use strict';
// MCP servers and deferral (SPEC §3–4) as plain data: the JS options (camelCase) become the core's
// AgentOptions fields `mcp_servers` and `deferral` (snake_case), which the core checks and refuses by
// name. Every rule lives in the core.

const { stringList } = require('./options.js');

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? `the string ${JSON.stringify(value)}` : typeof value;
}

function requireObject(value, what) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`Agent: ${what} must be an object, got ${describe(value)}`);
  }
}

const SERVER_KEYS = {
  name: 'name',
  transport: 'transport',
  protocol: 'protocol',
  trusted: 'trusted',
  levels: 'levels',
  deferral: 'deferral',
  eagerLoadTools: 'eager_load_tools',
  headers: 'headers',
  credentialHeaders: 'credential_headers',
  bearer: 'bearer',
  credentialEnv: 'credential_env',
};

/** One server's options as the core's McpServer. Unknown keys pass through for the core to refuse. */
function toNativeServer(server, i) {
  requireObject(server, `mcpServers[${i}]`);
  const out = {};
  for (const [key, value] of Object.entries(server)) {
    if (value === undefined) continue;
    let v = value;
    if (key === 'transport') v = toNativeTransport(value, i);
    else if (key === 'eagerLoadTools') v = stringList(`mcpServers[${i}].eagerLoadTools`, value);
    else if (key === 'headers' || key === 'credentialHeaders' || key === 'credentialEnv') {
      requireObject(value, `mcpServers[${i}].${key}`);
    }
    out[SERVER_KEYS[key] ?? key] = v;
  }
  return out;
}

function toNativeTransport(transport, i) {
  requireObject(transport, `mcpServers[${i}].transport`);
  return { ...transport };
}

/**
 * Helpers that make a server's options: `McpServer.stdio(name, command, args, options)` (a child
 * process) and `McpServer.http(name, url, options)` (streamable HTTP). `options`: `trusted`, `levels`,
 * `deferral` ("deferred" | "eager" | "hidden"), `eagerLoadTools`, `protocol` ("initialize" |
 * "stateless" | "auto"), for stdio `env`, `cwd` and `credentialEnv` (variable → credential alias), for
 * HTTP `headers` (sent as given), `credentialHeaders` (header → alias) and `bearer` (an alias sent as
 * `Authorization: Bearer …`). Credentials reach the server, never the model: a server's error quoting
 * them reaches the model redacted.
 */
const McpServer = {
  stdio(name, command, args = [], options = {}) {
    const { env, cwd, ...rest } = options;
    const transport = { type: 'stdio', command, args: stringList(`McpServer.stdio '${name}': args`, args) };
    if (env !== undefined) transport.env = env;
    if (cwd !== undefined) transport.cwd = cwd;
    return { name, transport, ...rest };
  },
  http(name, url, options = {}) {
    return { name, transport: { type: 'http', url }, ...options };
  },
};

const DEFERRAL_KEYS = { setting: 'setting', strategy: 'strategy', deferrableTools: 'deferrable_tools' };

/** The `mcpServers` and `deferral` options as the core's AgentOptions fields. */
function toNativeTooling(mcpServers, deferral) {
  const options = {};
  if (mcpServers != null) {
    if (!Array.isArray(mcpServers)) {
      throw new TypeError(`Agent: mcpServers must be an array of servers, got ${describe(mcpServers)}`);
    }
    if (mcpServers.length > 0) options.mcp_servers = mcpServers.map(toNativeServer);
  }
  if (deferral != null) {
    requireObject(deferral, 'deferral');
    options.deferral = {};
    for (const [key, value] of Object.entries(deferral)) {
      if (value === undefined) continue;
      options.deferral[DEFERRAL_KEYS[key] ?? key] = key === 'deferrableTools' ? stringList('deferral.deferrableTools', value) : value;
    }
  }
  return options;
}

module.exports = { McpServer, toNativeTooling };
