'use strict';
// Models for testing your own agents: `TestModel` answers from a script, `FunctionModel` with a function
// of each request. Neither reaches a network, yet both speak a real wire: the core writes each request as
// that wire's body and reads each reply back through the same decoder a hosted model's answer goes
// through, so a test on them exercises ambit's real decoding (streamed or not).

const { Model } = require('./models.js');
const { ConfigError } = require('./errors.js');

const WIRES = ['openai_chat', 'anthropic', 'openai_responses'];
const OPTIONS = ['wire', 'model', 'stream'];

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

/** The core's form of one reply: a string is a text reply; an object `{content, toolCalls, usage}`. */
function replyConfig(reply, where) {
  if (typeof reply === 'string') return { content: reply };
  if (reply === null || typeof reply !== 'object' || Array.isArray(reply)) {
    throw new TypeError(`${where}: a reply must be a string or an object {content, toolCalls, usage}, got ${describe(reply)}`);
  }
  for (const key of Object.keys(reply)) {
    if (!['content', 'toolCalls', 'usage'].includes(key)) {
      throw new ConfigError(`${where}: unknown reply field '${key}' (content, toolCalls, usage)`);
    }
  }
  const calls = reply.toolCalls ?? [];
  if (!Array.isArray(calls)) throw new TypeError(`${where}: toolCalls must be an array, got ${describe(calls)}`);
  const config = {
    tool_calls: calls.map((c) => {
      if (c === null || typeof c !== 'object') throw new TypeError(`${where}: a tool call must be an object {name, arguments, id}`);
      return { name: c.name, arguments: c.arguments ?? {}, id: c.id };
    }),
  };
  if (reply.content !== undefined) config.content = reply.content;
  if (reply.usage !== undefined) {
    config.usage = { input_tokens: reply.usage.inputTokens ?? 0, output_tokens: reply.usage.outputTokens ?? 0 };
  }
  return config;
}

function settings(cls, options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${cls}: options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTIONS.includes(key)) throw new ConfigError(`${cls}: unknown option '${key}' (${OPTIONS.join(', ')})`);
  }
  const wire = options.wire ?? 'openai_chat';
  if (!WIRES.includes(wire)) throw new ConfigError(`${cls}: wire must be one of ${WIRES.join(', ')}, got ${String(wire)}`);
  return { wire, model: options.model ?? 'test-model', stream: options.stream ?? false };
}

/**
 * A model answering from a script: the n-th request gets the n-th reply (a string, or
 * `{content, toolCalls: [{name, arguments, id}], usage: {inputTokens, outputTokens}}`). A request past
 * the script fails the run (`ModelError`, code `model_response`, naming it).
 */
class TestModel extends Model {
  /**
   * @param {Array<string | object>} replies
   * @param {{wire?: string, model?: string, stream?: boolean}} [options]
   */
  constructor(replies, options = {}) {
    const s = settings('TestModel', options);
    super(s.wire, s.model, { stream: s.stream });
    if (!Array.isArray(replies)) {
      throw new TypeError(`TestModel: replies must be an array of replies, got ${describe(replies)}`);
    }
    this.replies = replies.map((r, i) => replyConfig(r, `TestModel: replies[${i}]`));
  }

  toNative() {
    const config = { test_model: { wire: this.wire, model: this.model, stream: this.stream, replies: this.replies } };
    return { config: JSON.stringify(config) };
  }
}

/**
 * A model answering with `fn(request)` (sync or async) for each request: `{index, wire, model,
 * instructions, messages, tools, body}` (the conversation provider-neutral, and `body` the wire's request
 * as a hosted model would get it). It returns a reply as `TestModel` takes them; a throw fails the run
 * (`ModelError`, naming it).
 */
class FunctionModel extends Model {
  /**
   * @param {(request: object) => (string | object | Promise<string | object>)} fn
   * @param {{wire?: string, model?: string, stream?: boolean}} [options]
   */
  constructor(fn, options = {}) {
    const s = settings('FunctionModel', options);
    super(s.wire, s.model, { stream: s.stream });
    if (typeof fn !== 'function') throw new TypeError(`FunctionModel: fn must be a function, got ${describe(fn)}`);
    this.fn = fn;
  }

  toNative() {
    const fn = this.fn;
    // Called as a host tool is (an envelope back, never a throw into Rust).
    const ok = (reply) => JSON.stringify({ ok: true, value: replyConfig(reply, 'FunctionModel') });
    const failed = (e) => JSON.stringify({ ok: false, message: e instanceof Error ? e.message : String(e) });
    const answer = (reply) => {
      try {
        return ok(reply);
      } catch (e) {
        return failed(e);
      }
    };
    const call = (requestJson) => {
      try {
        const value = fn(JSON.parse(requestJson).arguments);
        if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
          return Promise.resolve(value).then(answer, failed);
        }
        return answer(value);
      } catch (e) {
        return failed(e);
      }
    };
    const config = { test_model: { wire: this.wire, model: this.model, stream: this.stream } };
    return { config: JSON.stringify(config), function: call };
  }
}

module.exports = { TestModel, FunctionModel };
