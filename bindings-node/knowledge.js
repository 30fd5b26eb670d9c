'use strict';
// Knowledge in Node (SPEC §14): a directory of documents the agent lists (knowledge_list) and reads
// (knowledge_read: text inline up to a cap, a larger or binary document as a path under the agent's
// scope), and the host's publish: text only, at most 200 KB, overwrite off by default. Every rule lives
// in the Rust core; this module only translates.

const native = require('./native.js');
const { AmbitError } = require('./index.js');
const { ConfigError } = require('./errors.js');
const { envelopeReader } = require('./envelope.js');
const { refuseUnknown } = require('./options.js');

/** A knowledge call refused or failed (code "knowledge_io" unless a subclass says otherwise). */
class KnowledgeError extends AmbitError {
  constructor(message, code = 'knowledge_io', details = {}, options) {
    super(message, code, options);
    this.name = 'KnowledgeError';
    Object.assign(this, details);
  }
}

/** An argument out of bounds or malformed (code "knowledge_invalid_argument"); `field` names it. */
class InvalidKnowledgeArgumentError extends KnowledgeError {
  constructor(message, details) {
    super(message, 'knowledge_invalid_argument', details);
    this.name = 'InvalidKnowledgeArgumentError';
  }
}

/** A document of that name exists and `overwrite` was off (code "knowledge_exists"). */
class KnowledgeExistsError extends KnowledgeError {
  constructor(message, details) {
    super(message, 'knowledge_exists', details);
    this.name = 'KnowledgeExistsError';
  }
}

const { unwrap } = envelopeReader(KnowledgeError, {
  knowledge_invalid_argument: InvalidKnowledgeArgumentError,
  knowledge_exists: KnowledgeExistsError,
});

function text(field, value) {
  if (typeof value !== 'string') {
    throw new InvalidKnowledgeArgumentError(`invalid knowledge argument '${field}': must be a string, got ${typeof value}`, { field });
  }
  // A JS string may hold a lone surrogate, which is no Unicode text (and would reach the core replaced).
  if (!value.isWellFormed()) {
    throw new InvalidKnowledgeArgumentError(`invalid knowledge argument '${field}': is not valid Unicode text (a lone surrogate)`, { field });
  }
  return value;
}

/** A knowledge directory: given to an agent (`new Agent({knowledge})`) and published into by the host. */
class Knowledge {
  /**
   * @param {string} dir absolute, or relative to the policy's working directory (for `publish`, to the
   *   process's)
   * @param {{inlineMaxBytes?: number}} [options] the most bytes of text knowledge_read returns inline
   *   (default 64 KiB, at most 1 MiB)
   */
  constructor(dir, options = {}) {
    this.dir = text('dir', dir);
    if (options === null || typeof options !== 'object') throw new ConfigError('Knowledge: options must be an object {inlineMaxBytes}');
    refuseUnknown('Knowledge', options, ['inlineMaxBytes']);
    const { inlineMaxBytes } = options;
    if (inlineMaxBytes != null && !(Number.isSafeInteger(inlineMaxBytes) && inlineMaxBytes >= 0)) {
      throw new ConfigError(`Knowledge: inlineMaxBytes must be a count (an integer from 0), got ${String(inlineMaxBytes)}`);
    }
    this.inlineMaxBytes = inlineMaxBytes;
    Object.freeze(this);
  }

  /**
   * Publishes a text document (at most 200 KB) into the directory, made if missing; the agent sees it on
   * its next request. An existing document is replaced only with `overwrite` (else KnowledgeExistsError).
   * @returns {{name: string, path: string, bytes: number, replaced: boolean}}
   */
  publish(name, content, { overwrite = false } = {}) {
    if (typeof overwrite !== 'boolean') {
      throw new InvalidKnowledgeArgumentError(`invalid knowledge argument 'overwrite': must be true or false, got ${typeof overwrite}`, { field: 'overwrite' });
    }
    return unwrap(native.knowledgePublish(this.dir, text('name', name), text('content', content), overwrite));
  }

  /** @internal The core's `knowledge` option. */
  toNative() {
    const config = { dir: this.dir };
    if (this.inlineMaxBytes != null) config.inline_max_bytes = this.inlineMaxBytes;
    return config;
  }
}

/** `knowledge: Knowledge` as the core's `knowledge` option, or nothing. */
function toNativeKnowledge(knowledge) {
  if (knowledge == null) return {};
  if (!(knowledge instanceof Knowledge)) {
    throw new TypeError(`Agent: knowledge must be a Knowledge (new Knowledge(dir)), got ${typeof knowledge}`);
  }
  return { knowledge: knowledge.toNative() };
}

module.exports = { Knowledge, KnowledgeError, InvalidKnowledgeArgumentError, KnowledgeExistsError, toNativeKnowledge };
