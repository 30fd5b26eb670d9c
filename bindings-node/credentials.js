'use strict';
// The credential broker in the JavaScript face of ambit (SPEC §15): credentials registered by alias
// and delivered to the tools that declare them, never to the model. Every rule (which tool gets what,
// the shell's environment, web_fetch's hosts, the redactor) lives in the Rust core; this module only
// gathers the registrations as data and wraps the callbacks so nothing they do can throw into Rust.

const { ConfigError } = require('./errors.js');

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  return String(e);
}

/**
 * Credentials by alias, for `new Agent({credentials})`:
 *
 *   new Credentials().value('github', token).env('openai', 'OPENAI_API_KEY')
 *     .callback('vault', async (alias) => fetchToken()).shellEnv('GITHUB_TOKEN', 'github')
 *     .webFetch('api.github.com', 'github')
 *
 * A tool declares the aliases it needs (`tool({..., credentials: ['github']})`) and reads them from its
 * context (`ctx.credential('github')`). Every tool result and error passes the core's redactor.
 */
class Credentials {
  #sources = {};
  #shellEnv = {};
  #webFetch = [];
  #callbacks = new Map();

  #add(alias, source) {
    if (typeof alias !== 'string') throw new ConfigError(`a credential alias must be a string, got ${typeof alias}`);
    if (Object.prototype.hasOwnProperty.call(this.#sources, alias)) {
      throw new ConfigError(`credential alias '${alias}' is registered twice`);
    }
    this.#sources[alias] = source;
    return this;
  }

  /** A credential with a fixed value. */
  value(alias, value) {
    if (typeof value !== 'string') throw new ConfigError(`credential '${alias}': the value must be a string`);
    return this.#add(alias, { value });
  }

  /** A credential read from the environment variable `name` each time it is needed. */
  env(alias, name) {
    if (typeof name !== 'string') throw new ConfigError(`credential '${alias}': the variable must be named by a string`);
    return this.#add(alias, { env: name });
  }

  /** A credential the host produces on demand: `fn(alias)`, plain or async, returns the value. */
  callback(alias, fn) {
    if (typeof fn !== 'function') throw new ConfigError(`credential '${alias}': the callback must be a function`);
    this.#add(alias, { callback: true });
    this.#callbacks.set(alias, fn);
    return this;
  }

  /** `shell_execute` runs with the environment variable `name` set to the credential `alias`. */
  shellEnv(name, alias) {
    this.#shellEnv[String(name)] = String(alias);
    return this;
  }

  /** `web_fetch` adds `header: <prefix><value>` for requests to `host` (default `Authorization: Bearer`). */
  webFetch(host, alias, { header = 'authorization', prefix } = {}) {
    this.#webFetch.push({ host, alias, header, ...(prefix == null ? {} : { prefix }) });
    return this;
  }

  /** @internal The native inputs: the core's CredentialsConfig, the callback aliases and the function. */
  _toNative() {
    const callbacks = this.#callbacks;
    return {
      config: { credentials: { ...this.#sources }, shell_env: { ...this.#shellEnv }, web_fetch: [...this.#webFetch] },
      aliases: [...callbacks.keys()],
      callback: async (alias) => {
        try {
          return JSON.stringify({ ok: true, value: await callbacks.get(alias)(alias) });
        } catch (e) {
          return JSON.stringify({ ok: false, message: errorMessage(e) });
        }
      },
    };
  }
}

/** The native agent inputs for `credentials` (undefined: none). */
function toNativeCredentials(credentials) {
  if (credentials == null) return { options: {}, config: {} };
  if (!(credentials instanceof Credentials)) {
    throw new TypeError('Agent: credentials must be a Credentials object (new Credentials().value(...))');
  }
  const n = credentials._toNative();
  return {
    options: { credentials: n.config },
    config: n.aliases.length > 0 ? { credentialCallbacks: n.aliases, credentialCallback: n.callback } : {},
  };
}

module.exports = { Credentials, toNativeCredentials };
