'use strict';
// Memory in Node (SPEC §14): `Memory.open("sqlite:///path")` or a `postgres://` URL, one namespace per
// agent name. It only translates: camelCase in, the core's snake_case JSON out as camelCase objects, and
// the core's memory error codes to error classes. Every rule (bounds, ranking, keys) lives in the Rust
// core. Times are milliseconds since the Unix epoch.

const native = require('./native.js');
const { refuseUnknown } = require('./options.js');
const { AmbitError } = require('./index.js');
const { envelopeReader, camel } = require('./envelope.js');

/** A memory call refused or failed (code "memory_store" unless a subclass says otherwise). */
class MemoryError extends AmbitError {
  constructor(message, code = 'memory_store', details = {}, options) {
    super(message, code, options);
    this.name = 'MemoryError';
    Object.assign(this, details);
  }
}

/** An argument out of bounds or malformed (code "memory_invalid_argument"); `field` names it. */
class InvalidMemoryArgumentError extends MemoryError {
  constructor(message, details) {
    super(message, 'memory_invalid_argument', details);
    this.name = 'InvalidMemoryArgumentError';
  }
}

/** No memory with that id or key for this agent (code "memory_not_found"). */
class MemoryNotFoundError extends MemoryError {
  constructor(message, details) {
    super(message, 'memory_not_found', details);
    this.name = 'MemoryNotFoundError';
  }
}

/** A write through read-only access, a sub-agent's grant (code "memory_read_only"). */
class MemoryReadOnlyError extends MemoryError {
  constructor(message, details) {
    super(message, 'memory_read_only', details);
    this.name = 'MemoryReadOnlyError';
  }
}

const BY_CODE = {
  memory_invalid_argument: InvalidMemoryArgumentError,
  memory_not_found: MemoryNotFoundError,
  memory_read_only: MemoryReadOnlyError,
};

const { toError, unwrap } = envelopeReader(MemoryError, BY_CODE);

/** One memory with camelCase keys. */
function toRecord(m) {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [camel(k), v]));
}

/** A memory store on SQLite or PostgreSQL, one namespace per agent name. */
class Memory {
  constructor(handle, url) {
    this._native = handle;
    /** The store's URL (an agent given this store opens it by URL). */
    this.url = url;
  }

  /** Opens `sqlite:///path` or `postgres://…`, applying migrations. */
  static async open(url) {
    if (typeof url !== 'string') throw new TypeError(`Memory.open: url must be a string, got ${typeof url}`);
    try {
      return new Memory(await native.openMemory(url), url);
    } catch (e) {
      let error;
      try {
        error = JSON.parse(e.message);
      } catch {
        throw e;
      }
      throw toError(error);
    }
  }

  /**
   * Saves a memory in `agent`'s namespace (`{body, title?, kind?, tags?, salience?, pinned?, key?, subject?}`);
   * with a `key` already saved, updates that memory in place (fields left out keep their values).
   * Resolves to `{memory, created}`.
   */
  async remember(agent, memory) {
    if (memory === null || typeof memory !== 'object') throw new TypeError('remember(agent, {body, ...})');
    const out = {};
    for (const [k, v] of Object.entries(memory)) {
      // The core refuses a field it does not know, by name; one tag is a one-entry list.
      if (v !== undefined) out[k] = k === 'tags' && typeof v === 'string' ? [v] : v;
    }
    const saved = unwrap(await this._native.remember(agent, JSON.stringify(out)));
    return { memory: toRecord(saved.memory), created: saved.created };
  }

  /**
   * With `query`, ranked by relevance over title, body and tags; without, pinned then highest salience.
   * `tags` keeps memories carrying all of them; `limit` 1 to 50 (default 10).
   */
  async recall(agent, options = {}) {
    refuseUnknown('Memory.recall', options, ['query', 'tags', 'kind', 'subjects', 'limit']);
    const { query, tags, kind, subjects, limit } = options;
    const recall = {};
    if (query !== undefined) recall.query = query;
    if (tags !== undefined) recall.tags = typeof tags === 'string' ? [tags] : tags;
    if (kind !== undefined) recall.kind = kind;
    if (subjects !== undefined) recall.subjects = typeof subjects === 'string' ? [subjects] : subjects;
    if (limit !== undefined) recall.limit = limit;
    return unwrap(await this._native.recall(agent, JSON.stringify(recall))).map(toRecord);
  }

  /** Forgets one memory by `{id}` or `{key}`; resolves to whether it existed. */
  async forget(agent, options = {}) {
    refuseUnknown('Memory.forget', options, ['id', 'key']);
    const { id, key } = options;
    return unwrap(await this._native.forget(agent, id ?? undefined, key ?? undefined));
  }

  /** Every memory of `agent`, oldest first. */
  async list(agent) {
    return unwrap(await this._native.list(agent)).map(toRecord);
  }

  /** The memories of `agent` (or of every agent) as JSON text: `{"version": 1, "memories": [...]}`. */
  async export(agent) {
    return unwrap(await this._native.export(agent ?? undefined));
  }
}

/** `memory` and `agentName` of `new Agent({...})` in the core's form, or nothing. */
function toNativeMemory(memory, agentName) {
  if (memory == null && agentName == null) return {};
  if (!(memory instanceof Memory)) {
    throw new TypeError(`Agent: memory must be a Memory (Memory.open(url)) given with agentName, got ${typeof memory}`);
  }
  if (typeof agentName !== 'string') {
    throw new TypeError(`Agent: agentName must name the agent in its memory store, got ${typeof agentName}`);
  }
  return { memory: { url: memory.url, agent: agentName } };
}

module.exports = {
  Memory,
  MemoryError,
  InvalidMemoryArgumentError,
  MemoryNotFoundError,
  MemoryReadOnlyError,
  toNativeMemory,
};
