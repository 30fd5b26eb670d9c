'use strict';
// The models ambit talks to, one class per wire. Each only describes the model; the core builds it
// (and checks the settings).

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

/** What every wire takes. Use {@link OpenAIChat}, {@link Anthropic} or {@link OpenAIResponses}. */
const { refuseUnknown } = require('./options.js');

/** Every key a model's options object may have. */
const MODEL_OPTIONS = ['baseUrl', 'apiKey', 'stream', 'timeout', 'maxRetries', 'maxTokens', 'maxToolNameBytes', 'contextWindow'];

class Model {
  /**
   * @param {string} wire
   * @param {string} model
   * @param {{baseUrl?: string, apiKey?: string, stream?: boolean, timeout?: number, maxRetries?: number, maxTokens?: number, maxToolNameBytes?: number, contextWindow?: number}} options
   */
  constructor(wire, model, options) {
    const cls = this.constructor.name;
    if (typeof model !== 'string') {
      throw new TypeError(`${cls}: the model name must be a string, got ${describe(model)}`);
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`${cls}: options must be an object, got ${describe(options)}`);
    }
    refuseUnknown(cls, options, MODEL_OPTIONS);
    for (const key of ['baseUrl', 'apiKey']) {
      if (options[key] != null && typeof options[key] !== 'string') {
        throw new TypeError(`${cls}: options.${key} must be a string, got ${describe(options[key])}`);
      }
    }
    if (options.stream != null && typeof options.stream !== 'boolean') {
      throw new TypeError(`${cls}: options.stream must be a boolean, got ${describe(options.stream)}`);
    }
    for (const key of ['timeout', 'maxRetries', 'maxTokens', 'maxToolNameBytes', 'contextWindow']) {
      if (options[key] != null && typeof options[key] !== 'number') {
        throw new TypeError(`${cls}: options.${key} must be a number, got ${describe(options[key])}`);
      }
    }
    this.wire = wire;
    this.model = model;
    this.baseUrl = options.baseUrl ?? undefined;
    this.apiKey = options.apiKey ?? undefined;
    this.stream = options.stream ?? false;
    this.timeout = options.timeout ?? undefined;
    this.maxRetries = options.maxRetries ?? undefined;
    // A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the
    // others): longer names reach the endpoint cut to fit; above the wire's limit the core refuses it.
    this.maxToolNameBytes = options.maxToolNameBytes ?? undefined;
    this.contextWindow = options.contextWindow ?? undefined;
  }

  toNative() {
    const config = {
      wire: this.wire,
      model: this.model,
      base_url: this.baseUrl,
      api_key: this.apiKey,
      stream: this.stream,
      timeout_secs: this.timeout,
      max_retries: this.maxRetries,
      max_tokens: this.maxTokens,
      max_tool_name_bytes: this.maxToolNameBytes,
      context_window: this.contextWindow,
    };
    return { config: JSON.stringify(config) };
  }
}

/** A model on the OpenAI Chat Completions wire (any OpenAI-compatible server by `baseUrl`). */
class OpenAIChat extends Model {
  /**
   * @param {string} model the model name, e.g. "gpt-4.1"
   * @param {{baseUrl?: string, apiKey?: string, stream?: boolean, timeout?: number, maxRetries?: number, maxToolNameBytes?: number}} [options]
   *   baseUrl and apiKey default to OPENAI_BASE_URL / OPENAI_API_KEY; maxToolNameBytes a limit on tool
   *   names below the wire's 64 bytes
   */
  constructor(model, options = {}) {
    super('openai_chat', model, options);
  }
}

/** A model on the OpenAI Responses wire. */
class OpenAIResponses extends Model {
  constructor(model, options = {}) {
    super('openai_responses', model, options);
  }
}

/** A model on the Anthropic Messages wire; `baseUrl` ends in `/v1`; `maxTokens` bounds one answer (default 4096). */
class Anthropic extends Model {
  constructor(model, options = {}) {
    super('anthropic', model, options);
    this.maxTokens = options && options.maxTokens != null ? options.maxTokens : undefined;
  }
}

module.exports = { Model, OpenAIChat, OpenAIResponses, Anthropic };
