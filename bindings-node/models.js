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
const { ConfigError } = require('./errors.js');

/**
 * The model settings every request carries, by option name and the core's name (the core checks them,
 * in one place, and names them the core's way).
 */
const SETTINGS = {
  maxOutputTokens: 'max_output_tokens',
  temperature: 'temperature',
  topP: 'top_p',
  stop: 'stop',
  seed: 'seed',
  toolChoice: 'tool_choice',
  parallelToolCalls: 'parallel_tool_calls',
  textToolCalls: 'text_tool_calls',
  reasoningEffort: 'reasoning_effort',
  thinkingBudget: 'thinking_budget',
  promptCaching: 'prompt_caching',
  strict: 'strict',
  store: 'store',
};

/** Every key every model's options object may have (Anthropic adds `maxTokens`). */
const MODEL_OPTIONS = ['baseUrl', 'apiKey', 'stream', 'timeout', 'maxRetries', 'maxToolNameBytes', 'contextWindow',
  'headers', 'query', ...Object.keys(SETTINGS)];

class Model {
  /**
   * @param {string} wire
   * @param {string} model
   * @param {Record<string, unknown>} options see `ModelOptions` in index.d.ts
   * @param {string[]} [extra] the options this wire takes beyond every wire's
   */
  constructor(wire, model, options, extra = []) {
    const cls = this.constructor.name;
    if (typeof model !== 'string') {
      throw new TypeError(`${cls}: the model name must be a string, got ${describe(model)}`);
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`${cls}: options must be an object, got ${describe(options)}`);
    }
    if (!extra.includes('maxTokens') && options.maxTokens !== undefined) {
      throw new ConfigError(`${cls}: unknown option 'maxTokens' (an Anthropic option); use maxOutputTokens`);
    }
    refuseUnknown(cls, options, [...MODEL_OPTIONS, ...extra]);
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
    // Headers and query parameters every request carries (the core checks each name, and that every
    // value is a text); copied, so the model stays as it was built.
    for (const key of ['headers', 'query']) {
      const v = options[key];
      if (v != null && (typeof v !== 'object' || Array.isArray(v))) {
        throw new TypeError(`${cls}: options.${key} must be an object of texts, got ${describe(v)}`);
      }
      this[key] = v == null ? undefined : { ...v };
    }
    for (const key of Object.keys(SETTINGS)) {
      // JSON has no NaN or Infinity (they would reach the core as null, that is, as absent).
      if (typeof options[key] === 'number' && !Number.isFinite(options[key])) {
        throw new ConfigError(`${cls}: options.${key} must be a finite number, got ${options[key]}`);
      }
      this[key] = options[key] ?? undefined;
    }
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
      headers: this.headers,
      query: this.query,
      settings: Object.fromEntries(Object.entries(SETTINGS).map(([key, name]) => [name, this[key]])),
    };
    return { config: JSON.stringify(config) };
  }
}

/** A model on the OpenAI Chat Completions wire (any OpenAI-compatible server by `baseUrl`). */
class OpenAIChat extends Model {
  /**
   * @param {string} model the model name, e.g. "gpt-4.1"
   * @param {Record<string, unknown>} [options] see `ModelOptions` in index.d.ts; baseUrl and apiKey
   *   default to OPENAI_BASE_URL / OPENAI_API_KEY; maxToolNameBytes a limit on tool names below the
   *   wire's 64 bytes; `maxTokens` is refused pointing to maxOutputTokens
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

/**
 * A model on the Anthropic Messages wire; `baseUrl` ends in `/v1`; `maxTokens` bounds one answer (default
 * 4096): the wire's own name for `maxOutputTokens` (both with different values are refused).
 */
class Anthropic extends Model {
  constructor(model, options = {}) {
    super('anthropic', model, options, ['maxTokens']);
    this.maxTokens = options && options.maxTokens != null ? options.maxTokens : undefined;
  }
}

module.exports = { Model, OpenAIChat, OpenAIResponses, Anthropic };
