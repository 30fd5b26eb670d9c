'use strict';
// The JavaScript face of ambit. It only translates: JS objects to the native binding's inputs, the
// core's results to camelCase objects, and the core's error codes to error classes. Every rule (the
// agent loop, tool validation, error formatting) lives in the Rust core.

const native = require('./native/index.js');

/** Every error ambit throws. `code` is the core's stable machine-readable code. */
class AmbitError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.name = 'AmbitError';
    this.code = code;
  }
}

/** The agent or a tool was configured wrongly (code "config"). */
class ConfigError extends AmbitError {
  constructor(message, options) {
    super(message, 'config', options);
    this.name = 'ConfigError';
  }
}

/** The model provider failed (codes "model_http", "model_transport", "model_response"). */
class ModelError extends AmbitError {
  constructor(message, code = 'model_response', status, options) {
    super(message, code, options);
    this.name = 'ModelError';
    /** The HTTP status the provider answered with, for "model_http"; else undefined. */
    this.status = status;
  }
}

/** The run reached its turn limit without a final answer (code "max_turns"). */
class MaxTurnsError extends AmbitError {
  constructor(message, options) {
    super(message, 'max_turns', options);
    this.name = 'MaxTurnsError';
  }
}

/** The run was cancelled (code "cancelled"). */
class CancelledError extends AmbitError {
  constructor(message, options) {
    super(message, 'cancelled', options);
    this.name = 'CancelledError';
  }
}

/** Turns a core error (`{code, message, status}`) into the matching error class. */
function toError(e) {
  const message = e.message;
  switch (e.code) {
    case 'config':
      return new ConfigError(message);
    case 'max_turns':
      return new MaxTurnsError(message);
    case 'cancelled':
      return new CancelledError(message);
    default:
      if (typeof e.code === 'string' && e.code.startsWith('model_')) {
        return new ModelError(message, e.code, e.status == null ? undefined : e.status);
      }
      return new AmbitError(message, String(e.code));
  }
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

/** A model on the OpenAI Chat Completions wire (any OpenAI-compatible server by `baseUrl`). */
class OpenAIChat {
  /**
   * @param {string} model the model name, e.g. "gpt-4.1"
   * @param {{baseUrl?: string, apiKey?: string}} [options] default to OPENAI_BASE_URL / OPENAI_API_KEY
   */
  constructor(model, options = {}) {
    if (typeof model !== 'string') {
      throw new TypeError(`OpenAIChat: the model name must be a string, got ${describe(model)}`);
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`OpenAIChat: options must be an object, got ${describe(options)}`);
    }
    for (const key of ['baseUrl', 'apiKey']) {
      if (options[key] != null && typeof options[key] !== 'string') {
        throw new TypeError(`OpenAIChat: options.${key} must be a string, got ${describe(options[key])}`);
      }
    }
    this.model = model;
    this.baseUrl = options.baseUrl ?? undefined;
    this.apiKey = options.apiKey ?? undefined;
  }

  toNative() {
    return { model: this.model, baseUrl: this.baseUrl, apiKey: this.apiKey };
  }
}

const TOOL = Symbol('ambit.tool');

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  if (e !== null && typeof e === 'object' && typeof e.message === 'string') return e.message;
  return String(e);
}

/**
 * Declares a host tool. `run` receives the arguments object the model sent; it may be sync or async.
 * Its return value reaches the model as text (a string as it is, anything else as JSON); a thrown
 * error becomes an error result the model sees.
 */
function tool(definition) {
  if (definition === null || typeof definition !== 'object') {
    throw new TypeError(`tool(): expected an object {name, description, parameters, run}, got ${describe(definition)}`);
  }
  const { name, description = '', parameters, run } = definition;
  if (typeof name !== 'string') {
    throw new TypeError(`tool(): name must be a string, got ${describe(name)}`);
  }
  if (typeof description !== 'string') {
    throw new TypeError(`tool '${name}': description must be a string, got ${describe(description)}`);
  }
  if (typeof run !== 'function') {
    throw new TypeError(`tool '${name}': run must be a function, got ${describe(run)}`);
  }
  // The schema is checked by the core when the agent is built; a value JSON cannot express goes as null.
  let parametersJson;
  try {
    parametersJson = JSON.stringify(parameters) ?? 'null';
  } catch (e) {
    throw new ConfigError(`tool '${name}': parameters are not JSON: ${errorMessage(e)}`);
  }
  // The native side calls this with the arguments' JSON text and reads back an envelope; the
  // envelope keeps a thrown error from ever crossing into Rust as an exception.
  const call = async (argumentsJson) => {
    try {
      const value = await run(JSON.parse(argumentsJson));
      return JSON.stringify({ ok: true, value: value === undefined ? null : value });
    } catch (e) {
      return JSON.stringify({ ok: false, message: errorMessage(e) });
    }
  };
  return Object.freeze({ [TOOL]: true, name, description, parameters, run, _native: { name, description, parameters: parametersJson, call } });
}

/** An agent: a model, instructions and tools. */
class Agent {
  #native;

  /**
   * @param {{model: OpenAIChat, instructions?: string, tools?: ReturnType<typeof tool>[], maxTurns?: number}} options
   */
  constructor(options) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`Agent: expected an options object {model, instructions, tools, maxTurns}, got ${describe(options)}`);
    }
    const { model, instructions, tools = [], maxTurns } = options;
    if (model != null && !(model instanceof OpenAIChat)) {
      throw new TypeError(`Agent: model must be a model object such as new OpenAIChat("gpt-4.1"), got ${describe(model)}`);
    }
    if (instructions != null && typeof instructions !== 'string') {
      throw new TypeError(`Agent: instructions must be a string, got ${describe(instructions)}`);
    }
    if (maxTurns != null && !(Number.isInteger(maxTurns) && maxTurns >= 0 && maxTurns <= 0xffffffff)) {
      throw new ConfigError(`Agent: maxTurns must be a positive integer, got ${String(maxTurns)}`);
    }
    if (!Array.isArray(tools)) {
      throw new TypeError(`Agent: tools must be an array of tool(...) objects, got ${describe(tools)}`);
    }
    tools.forEach((t, i) => {
      if (t === null || typeof t !== 'object' || t[TOOL] !== true) {
        throw new TypeError(`Agent: tools[${i}] is not a tool; make it with tool({name, description, parameters, run})`);
      }
    });
    const built = native.createAgent(
      {
        model: model == null ? undefined : model.toNative(),
        instructions: instructions ?? undefined,
        maxTurns: maxTurns ?? undefined,
      },
      tools.map((t) => t._native),
    );
    if (!(built instanceof native.NativeAgent)) throw toError(built);
    this.#native = built;
  }

  /**
   * Runs the agent from one user message to the final answer.
   * @param {string} input
   */
  async run(input) {
    if (typeof input !== 'string') {
      throw new TypeError(`Agent.run: input must be a string, got ${describe(input)}`);
    }
    const envelope = JSON.parse(await this.#native.run(input));
    if (!envelope.ok) throw toError(envelope.error);
    return toRunResult(envelope.result);
  }
}

function toRunResult(r) {
  return {
    output: r.output,
    toolCalls: r.tool_calls.map((c) => ({
      id: c.id,
      name: c.name,
      arguments: c.arguments,
      result: c.result,
      isError: c.is_error,
    })),
    usage: {
      requests: r.usage.requests,
      inputTokens: r.usage.input_tokens,
      outputTokens: r.usage.output_tokens,
      cacheReadTokens: r.usage.cache_read_tokens,
      cacheWriteTokens: r.usage.cache_write_tokens,
    },
    turns: r.turns,
    messages: r.messages.map(toMessage),
  };
}

function toMessage(m) {
  switch (m.role) {
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
      };
    case 'tool':
      return { role: 'tool', callId: m.call_id, name: m.name, content: m.content, isError: m.is_error };
    default:
      return { ...m };
  }
}

module.exports = {
  Agent,
  OpenAIChat,
  tool,
  AmbitError,
  ConfigError,
  ModelError,
  MaxTurnsError,
  CancelledError,
};
