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

const OAUTH_KEYS = {
  grant: 'grant',
  clientName: 'client_name',
  redirectUri: 'redirect_uri',
  scopes: 'scopes',
  clientId: 'client_id',
  clientSecret: 'client_secret',
  clientMetadataUrl: 'client_metadata_url',
  issuer: 'issuer',
};

/** `oauth.refreshLockTimeout` (seconds) as the core's `refresh_lock_timeout_ms`. */
function refreshLockTimeoutMs(value, i) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`Agent: mcpServers[${i}].oauth.refreshLockTimeout must be a positive number of seconds, got ${describe(value)}`);
  }
  return Math.max(1, Math.round(value * 1000));
}

/** A server's `oauth` as the core's McpOAuth (the callbacks go beside it). */
function toNativeOAuth(oauth, i) {
  requireObject(oauth, `mcpServers[${i}].oauth`);
  const out = {};
  for (const [key, value] of Object.entries(oauth)) {
    if (value === undefined || key === 'onAuthorize') continue;
    if (key === 'refreshLockTimeout') {
      out.refresh_lock_timeout_ms = refreshLockTimeoutMs(value, i);
      continue;
    }
    if (key === 'tokenStore') {
      if (typeof value === 'string') out.token_file = value;
      else {
        requireObject(value, `mcpServers[${i}].oauth.tokenStore`);
        for (const m of ['load', 'save', 'clear']) {
          if (typeof value[m] !== 'function') {
            throw new TypeError(`Agent: mcpServers[${i}].oauth.tokenStore must be a path or have load, save and clear; ${m} is ${describe(value[m])}`);
          }
        }
      }
      continue;
    }
    out[OAUTH_KEYS[key] ?? key] = key === 'scopes' ? stringList(`mcpServers[${i}].oauth.scopes`, value) : value;
  }
  if (oauth.onAuthorize !== undefined && typeof oauth.onAuthorize !== 'function') {
    throw new TypeError(`Agent: mcpServers[${i}].oauth.onAuthorize must be a function, got ${describe(oauth.onAuthorize)}`);
  }
  return out;
}

/** One server's options as the core's McpServer. Unknown keys pass through for the core to refuse. */
function toNativeServer(server, i) {
  requireObject(server, `mcpServers[${i}]`);
  const out = {};
  for (const [key, value] of Object.entries(server)) {
    if (value === undefined) continue;
    if (key === 'onElicit') {
      if (typeof value !== 'function') {
        throw new TypeError(`Agent: mcpServers[${i}].onElicit must be a function, got ${describe(value)}`);
      }
      continue;
    }
    let v = value;
    if (key === 'oauth') v = toNativeOAuth(value, i);
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

/** What a host callback answers the core: `{"ok": true, "value": text}` or `{"ok": false, "message"}`. */
function envelope(run) {
  return Promise.resolve()
    .then(run)
    .then((value) => JSON.stringify({ ok: true, value }), (e) => JSON.stringify({ ok: false, message: e instanceof Error ? e.message : String(e) }));
}

/**
 * The servers' host callbacks as the native agent takes them: `[server, kind]` pairs and one function.
 * `oauth.onAuthorize(url)` returns (or resolves to) the redirect URL; `oauth.tokenStore` is an object
 * with `load(key)` (a string or null), `save(key, value)` and `clear(key)`; `onElicit(request)` gets
 * `{server, message, mode, schema, url}` and returns an object (accepted, with that content), "decline"
 * or "cancel".
 */
function toNativeMcpHooks(mcpServers) {
  const table = new Map();
  for (const s of Array.isArray(mcpServers) ? mcpServers : []) {
    if (s == null || typeof s !== 'object') continue;
    const o = s.oauth;
    if (o && typeof o.onAuthorize === 'function') {
      table.set(`${s.name}\tauthorize`, async (url) => {
        const back = await o.onAuthorize(url);
        if (typeof back !== 'string') throw new TypeError(`onAuthorize must return the redirect URL (a string), got ${describe(back)}`);
        return back;
      });
    }
    if (o && o.tokenStore != null && typeof o.tokenStore === 'object') {
      const store = o.tokenStore;
      table.set(`${s.name}\ttoken_store`, async (opJson) => {
        const op = JSON.parse(opJson);
        if (op.op === 'load') {
          const v = await store.load(op.key);
          if (v != null && typeof v !== 'string') throw new TypeError(`tokenStore.load must return a string or null, got ${describe(v)}`);
          return JSON.stringify(v ?? null);
        }
        if (op.op === 'save') await store.save(op.key, op.value);
        else await store.clear(op.key);
        return 'null';
      });
    }
    if (typeof s.onElicit === 'function') {
      const handler = s.onElicit;
      table.set(`${s.name}\telicit`, async (requestJson) => {
        const answer = await handler(JSON.parse(requestJson));
        if (answer === 'decline' || answer === 'cancel' || answer === 'accept') return JSON.stringify({ action: answer });
        if (answer != null && typeof answer === 'object' && !Array.isArray(answer)) {
          return JSON.stringify({ action: 'accept', content: answer });
        }
        throw new TypeError(`the elicitation handler must return an object, "decline" or "cancel", got ${describe(answer)}`);
      });
    }
  }
  if (table.size === 0) return {};
  return {
    mcpHooks: [...table.keys()].map((k) => k.split('\t')),
    mcpHook: (requestJson) => {
      const { server, kind, arg } = JSON.parse(requestJson);
      return envelope(() => table.get(`${server}\t${kind}`)(arg));
    },
  };
}

module.exports = { McpServer, toNativeTooling, toNativeMcpHooks };
