'use strict';
// The JavaScript face of ambit. It only translates: JS objects to the native binding's inputs, the
// core's results to camelCase objects, and the core's error codes to error classes. Every rule (the
// agent loop, tool validation, error formatting) lives in the Rust core.

const content = require('./content.js');
const native = require('./native.js');
const { Model, OpenAIChat, OpenAIResponses, Anthropic } = require('./models.js');
const { toNativePolicy, toNativeBuiltins, toolDeclarations, toToolListing, toApprovalRequest } = require('./policy.js');
const { McpServer, toNativeTooling, toNativeMcpHooks } = require('./mcp.js');
const { toNativeSubagents } = require('./subagents.js');

const { AmbitError, ConfigError, InternalError } = require('./errors.js');
const { refuseUnknown, stringList } = require('./options.js');


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

/**
 * The run went past a hard budget (code "budget_exceeded"). `budget` is "tokens" or "cost"; `limit`
 * and `spent` are in its unit; `usage` (and `cost`, when the price table has the model) is what the run
 * used.
 */
class BudgetError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'budget_exceeded', options);
    this.name = 'BudgetError';
    this.budget = details.budget;
    this.limit = details.limit;
    this.spent = details.spent;
    this.cost = details.cost ?? undefined;
    this.usage = details.usage ? toUsage(details.usage) : undefined;
  }
}

/**
 * A streamed event too large for a JavaScript string (code "event_too_large", Node only): its JSON text
 * passes V8's string limit (about 512 MiB). The stream ends with it, after every event before it; the
 * run is cancelled. `event` is the event's type, `size` its text's length, `limit` the most one may have.
 * `Agent.run` rejects with it too when its result's text would not fit (`event`: "run result"); a
 * run's error too long keeps its own class, its message shortened.
 */
class EventTooLargeError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'event_too_large', options);
    this.name = 'EventTooLargeError';
    this.event = details.event;
    this.size = details.size;
    this.limit = details.limit;
  }
}

/**
 * The model's output token limit cut its answer in the middle of tool calls (code "output_truncated"):
 * none of them ran. `tools` names their tools; `usage` is what the run used.
 */
class OutputTruncatedError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'output_truncated', options);
    this.name = 'OutputTruncatedError';
    this.tools = Array.isArray(details.tools) ? details.tools : [];
    this.usage = details.usage ? toUsage(details.usage) : undefined;
  }
}

/**
 * The model's final answer did not match the agent's `outputType`, after the wrong answers went back to
 * it `retries` times (code "output_invalid"). `attempt` is the last answer's text; `usage` what the run used.
 */
class OutputInvalidError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'output_invalid', options);
    this.name = 'OutputInvalidError';
    this.attempt = typeof details.attempt === 'string' ? details.attempt : '';
    this.retries = details.retries;
    this.usage = details.usage ? toUsage(details.usage) : undefined;
  }
}

/** The run was cancelled (code "cancelled"). */
class CancelledError extends AmbitError {
  constructor(message, options) {
    super(message, 'cancelled', options);
    this.name = 'CancelledError';
  }
}

/**
 * A message history given as a run's input breaks a rule (code "invalid_message"): `index` is the
 * message's place in the list, `field` the field that is wrong (`role`, `call_id`, `tool_calls[0].id`,
 * as the core's form spells it; empty for the whole entry). Nothing was sent.
 */
class InvalidMessageError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'invalid_message', options);
    this.name = 'InvalidMessageError';
    this.index = details.index ?? 0;
    this.field = details.field ?? '';
  }
}

/**
 * A hook or guardrail threw (or answered what its point does not take), code "hook_failed": `hook` is
 * its name, `point` where it ran (`before_tool_call`, …, `input_guardrail`, `output_guardrail`). The run
 * ended there; a session stores nothing of it.
 */
class HookFailedError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'hook_failed', options);
    this.name = 'HookFailedError';
    this.hook = details.hook ?? '';
    this.point = details.point ?? '';
  }
}

/**
 * A guardrail tripped, code "guardrail_tripped": `guardrail` is its name, `kind` "input" or "output",
 * `verdict` the `info` it gave. No tool ran after a tripped input guardrail; no answer was returned.
 */
class GuardrailTrippedError extends AmbitError {
  constructor(message, details = {}, options) {
    super(message, 'guardrail_tripped', options);
    this.name = 'GuardrailTrippedError';
    this.guardrail = details.guardrail ?? '';
    this.kind = details.kind ?? '';
    this.verdict = details.verdict ?? null;
    if (details.usage) this.usage = toUsage(details.usage);
  }
}

/** Turns a core error (`{code, message, status}`) into the matching error class. */
function toError(e) {
  const message = e.message;
  const details = e.details ? JSON.parse(e.details) : {};
  switch (e.code) {
    case 'config':
      return new ConfigError(message);
    case 'max_turns': {
      const err = new MaxTurnsError(message);
      if (details.usage) err.usage = toUsage(details.usage);
      return err;
    }
    case 'budget_exceeded':
      return new BudgetError(message, details);
    case 'output_truncated':
      return new OutputTruncatedError(message, details);
    case 'event_too_large':
      return new EventTooLargeError(message, details);
    case 'output_invalid':
      return new OutputInvalidError(message, details);
    case 'invalid_message':
      return new InvalidMessageError(message, details);
    case 'hook_failed':
      return new HookFailedError(message, details);
    case 'guardrail_tripped':
      return new GuardrailTrippedError(message, details);
    case 'cancelled':
      return new CancelledError(message);
    case 'internal':
      return new InternalError(message);
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

const TOOL = Symbol('ambit.tool');

/**
 * The host values of the runs under way, by id: a run's `context` stays here, in JavaScript; the core
 * carries only its id to the run's tools.
 */
const CONTEXTS = new Map();
let nextContext = 0;
/** A stream's iterator dropped before it ended (never run out, returned or aborted): its context is
 * given back and its run cancelled when the iterator is collected. */
const ABANDONED = new FinalizationRegistry((held) => held.release());

/** Keeps `options.context` for one run; its id (undefined: the run has none). */
function enterContext(options) {
  if (!options || !Object.prototype.hasOwnProperty.call(options, 'context') || options.context === undefined) {
    return undefined;
  }
  // Never an id a run still holds (after the counter wraps).
  do {
    nextContext = nextContext >= 0xfffffff0 ? 1 : nextContext + 1;
  } while (CONTEXTS.has(nextContext));
  CONTEXTS.set(nextContext, options.context);
  return nextContext;
}

/** A run's input for the native layer: `[text, messagesJson]`. */
function runInput(where, input) {
  if (typeof input === 'string') return [input, undefined];
  if (Array.isArray(input) && input.some(content.isPart)) {
    // An array of parts (strings among them are text): one user message made of them.
    return ['', JSON.stringify([{ role: 'user', content: input.map(content.partJson) }])];
  }
  if (Array.isArray(input)) return ['', JSON.stringify(input.map(fromMessage))];
  throw new TypeError(`${where}: input must be a string, an array of parts or an array of messages, got ${describe(input)}`);
}

/** Every key a tool definition may have. */
const TOOL_OPTIONS = [
  'name', 'description', 'parameters', 'run', 'level', 'requiresApproval', 'allowBlank', 'idempotent', 'credentials',
];

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
  refuseUnknown('tool()', definition, TOOL_OPTIONS);
  const { name, description = '', run } = definition;
  // Typed parameters: a zod schema gives the JSON Schema the core checks the arguments by, and its
  // parse turns the checked arguments into the typed value `run` gets.
  const zod = fromZod(definition.parameters);
  const parameters = zod === undefined ? definition.parameters : zod.json;
  const parse = zod === undefined ? (args) => args : zod.parse;
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
  // A synchronous `run` is answered at once; a promise is awaited (one more trip to this thread).
  // An Image (or an array of parts holding one) goes as the core's content value: its images reach the
  // model in the wire's tool-result blocks.
  const ok = (value) =>
    JSON.stringify({ ok: true, value: value === undefined ? null : content.toolContent(value) ?? value });
  // The stack goes to the core's log and trace (redacted), never to the model.
  const failed = (e) => JSON.stringify({ ok: false, message: errorMessage(e), stack: e instanceof Error ? String(e.stack ?? '') : '' });
  const call = (requestJson) => {
    try {
      const request = JSON.parse(requestJson);
      const value = run(parse(request.arguments), new TaskContext(request.task, request.credentials, request.context));
      if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
        return Promise.resolve(value).then(ok, failed);
      }
      return ok(value);
    } catch (e) {
      return failed(e);
    }
  };
  const declared = toolDeclarations(name, definition);
  const credentials = definition.credentials == null ? undefined
    : stringList(`tool '${name}': credentials`, definition.credentials);
  return Object.freeze({
    [TOOL]: true,
    name,
    description,
    parameters,
    run,
    ...declared,
    credentials,
    _native: { name, description, parameters: parametersJson, call, ...declared, credentials },
  });
}

/**
 * What a tool call sees of the background task it runs in (the second argument of `run`).
 * `progress(note)` reports a short note (also the task's heartbeat); `cancelled` turns true when the
 * task is asked to stop, so a long tool checks it at its checkpoints and unwinds. Outside the
 * background, `inBackground` is false, progress goes nowhere and `cancelled` stays false.
 */
class TaskContext {
  #token;
  #credentials;
  #context;
  constructor(token, credentials, context) {
    this.#token = token;
    this.#credentials = credentials ?? {};
    this.#context = context ?? 0;
  }
  /**
   * The run's context: the value given to `agent.run(input, {context})` (a database pool, the current
   * user). It stays in JavaScript: never sent to the model, never stored. A run given none throws a
   * ConfigError.
   */
  get context() {
    if (!this.#context || !CONTEXTS.has(this.#context)) {
      throw new ConfigError('the run has no context: pass one with agent.run(input, { context })');
    }
    return CONTEXTS.get(this.#context);
  }
  /**
   * The value of a credential the tool declared (`tool({credentials: [...]})`), produced for this call
   * by the agent's Credentials. The redactor shows the model `[credential:alias]` if it is returned.
   */
  credential(alias) {
    if (!Object.prototype.hasOwnProperty.call(this.#credentials, alias)) {
      const declared = Object.keys(this.#credentials).sort().join(', ');
      throw new ConfigError(`credential '${alias}' was not declared by the tool (declared: ${declared})`);
    }
    return this.#credentials[alias];
  }
  get inBackground() {
    return this.#token !== 0;
  }
  progress(note) {
    native.taskProgress(this.#token, String(note));
  }
  get cancelled() {
    return native.taskCancelled(this.#token);
  }
}

/**
 * A zod (4) schema (anything with `toJSONSchema()` and `parse`) as the core takes a type: the JSON Schema
 * of what it reads (its input side: the model writes that; `parse` makes the output side, transforms
 * included), without the `$schema` marker, and its parse; `undefined` for anything else. The core checks
 * the JSON against that schema; zod's parse then only builds the typed value (and runs its refinements).
 */
function fromZod(schema) {
  if (schema == null || typeof schema.toJSONSchema !== 'function' || typeof schema.parse !== 'function') {
    return undefined;
  }
  const { $schema, ...json } = schema.toJSONSchema({ io: 'input' });
  return { json, parse: (value) => schema.parse(value) };
}

/** Every option `new Agent({...})` reads; any other key is refused by name. */
const AGENT_OPTIONS = [
  'model', 'instructions', 'tools', 'maxTurns', 'policy', 'builtins', 'maxConcurrency', 'maxTokens', 'maxCost',
  'prices', 'checklist', 'checklistNudgeCap', 'background', 'heartbeat', 'scratchpad', 'vision', 'mcpServers', 'deferral',
  'subagents', 'ledger', 'routine', 'memory', 'agentName', 'outputType', 'skills', 'knowledge', 'credentials',
  'profiles', 'agents',
  'hooks', 'inputGuardrails', 'outputGuardrails',
];

/** `profiles`: `{name: model}`, the models `agent_spawn`'s `profile` may name. */
function toNativeProfiles(profiles) {
  if (profiles == null) return undefined;
  if (typeof profiles !== 'object' || Array.isArray(profiles)) {
    throw new ConfigError(`Agent: profiles must be an object of names to models, got ${describe(profiles)}`);
  }
  return Object.entries(profiles).map(([name, model]) => {
    if (!(model instanceof Model)) {
      throw new ConfigError(`Agent: profiles.${name} must be a model such as new OpenAIChat("gpt-4.1-nano"), got ${describe(model)}`);
    }
    return { name, model: model.toNative() };
  });
}

/** `agents`: `{name: {agent, description}}`, the named agents `agent_delegate` hands work to. */
function toNativeNamedAgents(agents) {
  if (agents == null) return undefined;
  if (typeof agents !== 'object' || Array.isArray(agents)) {
    throw new ConfigError(`Agent: agents must be an object of names to {agent, description}, got ${describe(agents)}`);
  }
  const checked = Object.entries(agents).map(([name, named]) => {
    if (named === null || typeof named !== 'object' || Array.isArray(named)) {
      throw new ConfigError(`Agent: agents.${name} must be {agent, description}, got ${describe(named)}`);
    }
    refuseUnknown(`Agent: agents.${name}`, named, ['agent', 'description']);
    if (!(named.agent instanceof Agent)) {
      throw new ConfigError(`Agent: agents.${name}.agent must be an Agent, got ${describe(named.agent)}`);
    }
    if (typeof named.description !== 'string') {
      throw new ConfigError(`Agent: agents.${name}.description must be a string, got ${describe(named.description)}`);
    }
    return [name, named];
  });
  // Lent only once every entry is checked, for the createAgent call that follows.
  return checked.map(([name, named]) => ({
    name,
    description: named.description,
    handle: named.agent._nativeHandle().lendForNaming(),
  }));
}

const HOOK_POINTS = ['run_start', 'run_end', 'before_model_request', 'after_model_response', 'before_tool_call',
  'after_tool_call'];

/**
 * What a hook or guardrail knows of its run: its `name`, and the run's `context` (the value given to
 * `agent.run(input, {context})`; a run given none throws ConfigError).
 */
class HookContext {
  #task;
  constructor(name, context) {
    this.name = name;
    this.#task = new TaskContext(0, {}, context);
  }
  get context() {
    return this.#task.context;
  }
}

/** A host function as the core calls it: the envelope in, `{ok, value}` (or `{ok: false, message}`) out. */
function nativeFunction(name, run, answer) {
  const ok = (value) => {
    try {
      return JSON.stringify({ ok: true, value: answer(value) });
    } catch (e) {
      return failed(e);
    }
  };
  const failed = (e) => JSON.stringify({ ok: false, message: errorMessage(e) });
  return (requestJson) => {
    try {
      const request = JSON.parse(requestJson);
      const value = run(new HookContext(name, request.context), request.arguments);
      if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
        return Promise.resolve(value).then(ok, failed);
      }
      return ok(value);
    } catch (e) {
      return failed(e);
    }
  };
}

/** `hooks`, `inputGuardrails` and `outputGuardrails` as the native side takes them. */
function toNativeHooks(hooks = [], inputGuardrails = [], outputGuardrails = []) {
  const entry = (what, h, i) => {
    if (h === null || typeof h !== 'object' || typeof h.run !== 'function') {
      throw new TypeError(`Agent: ${what}[${i}] must be {${what === 'hooks' ? 'point, ' : ''}run, name?}, got ${describe(h)}`);
    }
    const name = h.name ?? h.run.name;
    if (typeof name !== 'string') throw new TypeError(`Agent: ${what}[${i}].name must be a string`);
    return name;
  };
  const list = (what, value) => {
    if (!Array.isArray(value)) throw new TypeError(`Agent: ${what} must be an array, got ${describe(value)}`);
    return value;
  };
  const native = list('hooks', hooks).map((h, i) => {
    const name = entry('hooks', h, i);
    if (!HOOK_POINTS.includes(h.point)) {
      throw new ConfigError(`Agent: hooks[${i}]: there is no hook point '${String(h.point)}' (points: ${HOOK_POINTS.join(', ')})`);
    }
    const answer = (value) => {
      if (value === undefined || value === null) return null;
      if (typeof value === 'object' && 'refuse' in value) return { action: 'refuse', reason: value.refuse };
      if (typeof value === 'object' && 'replace' in value) return { action: 'replace', value: value.replace };
      throw new TypeError(`a ${h.point} hook returns undefined, {replace: value} or {refuse: reason}`);
    };
    return { name, point: h.point, call: nativeFunction(name, h.run, answer) };
  });
  const guardrails = [];
  for (const [kind, value] of [['input', inputGuardrails], ['output', outputGuardrails]]) {
    list(`${kind}Guardrails`, value).forEach((g, i) => {
      const name = entry(`${kind}Guardrails`, g, i);
      const answer = (v) => {
        if (v === null || typeof v !== 'object' || typeof v.tripped !== 'boolean') {
          throw new TypeError('a guardrail returns {tripped: boolean, info?}');
        }
        return { tripped: v.tripped, info: v.info ?? null };
      };
      guardrails.push({ name, point: kind, call: nativeFunction(name, g.run, answer) });
    });
  }
  return { hooks: native, guardrails };
}

/**
 * `outputType`: the final answer's type, `{name, schema, retries?, parse?}`: `schema` a JSON Schema for an
 * object, or a zod (4) schema, whose JSON Schema it gives (`toJSONSchema()`) and whose `parse` builds the
 * answer; `parse` turns the checked JSON into your type (default: the JSON itself, or the zod schema's).
 * The core checks the answer against the schema. Returns the core's option and the parser.
 */
function toNativeOutput(outputType) {
  if (outputType == null) return { config: {}, parse: undefined };
  if (typeof outputType !== 'object' || Array.isArray(outputType)) {
    throw new TypeError(`Agent: outputType must be an object {name, schema, retries?, parse?}, got ${describe(outputType)}`);
  }
  refuseUnknown('Agent: outputType', outputType, ['name', 'schema', 'retries', 'parse']);
  const { name, retries } = outputType;
  let { schema, parse } = outputType;
  if (typeof name !== 'string') throw new TypeError(`Agent: outputType.name must be a string, got ${describe(name)}`);
  const zod = fromZod(schema);
  if (zod !== undefined) {
    schema = zod.json;
    parse = parse ?? zod.parse;
  }
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new TypeError(`Agent: outputType.schema must be a JSON Schema object or a zod schema, got ${describe(schema)}`);
  }
  if (parse != null && typeof parse !== 'function') {
    throw new TypeError(`Agent: outputType.parse must be a function, got ${describe(parse)}`);
  }
  if (retries != null && !(Number.isInteger(retries) && retries >= 0 && retries <= 0xffffffff)) {
    throw new ConfigError(`Agent: outputType.retries must be a whole number from 0, got ${String(retries)}`);
  }
  return { config: { output: { name, schema, ...(retries == null ? {} : { retries }) } }, parse };
}

/** The key under which `withPolicy` hands a built native agent to the constructor. */
const FROM_NATIVE = Symbol('ambit.agent.native');

/** An agent: a model, instructions and tools. */
class Agent {
  #native;
  /** How the checked final answer becomes the caller's type (`outputType.parse`), or undefined. */
  #parseOutput;

  /** @internal `outputType.parse`, for sessions.js. */
  _outputParser() {
    return this.#parseOutput;
  }

  /** @internal The native agent, for sessions.js. */
  _nativeHandle() {
    return this.#native;
  }

  /**
   * @param {{model: OpenAIChat, instructions?: string, tools?: ReturnType<typeof tool>[], maxTurns?: number}} options
   */
  constructor(options) {
    if (options != null && options[FROM_NATIVE] instanceof native.NativeAgent) {
      this.#native = options[FROM_NATIVE];
      return;
    }
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`Agent: expected an options object {model, instructions, tools, maxTurns}, got ${describe(options)}`);
    }
    refuseUnknown('Agent', options, AGENT_OPTIONS);
    const {
      model,
      instructions,
      tools = [],
      maxTurns,
      policy,
      builtins,
      maxConcurrency,
      maxTokens,
      maxCost,
      prices,
      checklist,
      checklistNudgeCap,
      background,
      heartbeat,
      scratchpad,
      vision,
      mcpServers,
      deferral,
      subagents,
      ledger,
      routine,
      memory,
      agentName,
      outputType,
      skills,
      knowledge,
      credentials,
      profiles,
      agents,
      hooks,
      inputGuardrails,
      outputGuardrails,
    } = options;
    const output = toNativeOutput(outputType);
    const creds = require('./credentials.js').toNativeCredentials(credentials);
    if (model != null && !(model instanceof Model)) {
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
    if (ledger != null && !(ledger._native instanceof native.NativeLedgerTools)) {
      throw new TypeError(`Agent: ledger must be the tools of a routine's run, ledger.forRoutine(scope, {runId}), got ${describe(ledger)}`);
    }
    if (routine != null && !(routine.tools && routine.tools._native instanceof native.NativeLedgerTools)) {
      throw new TypeError(`Agent: routine must be the RunContext an agent factory was given, got ${describe(routine)}`);
    }
    // The run's tools of a routine (report_outcome, list_my_*), after the ledger's when both are given.
    let runTools = ledger == null ? undefined : ledger._native;
    if (routine != null) runTools = runTools == null ? routine.tools._native : runTools.join(routine.tools._native);
    const built = native.createAgent(
      {
        model: model == null ? undefined : model.toNative(),
        instructions: instructions ?? undefined,
        maxTurns: maxTurns ?? undefined,
        options: loopOptions({
          maxConcurrency,
          maxTokens,
          maxCost,
          prices,
          checklist,
          checklistNudgeCap,
          background,
          heartbeat,
          scratchpad,
          vision,
        }, {
          ...toNativeTooling(mcpServers, deferral),
          ...toNativeSubagents(subagents),
          // memory.js loads after this module's exports exist (it takes AmbitError from them).
          ...require('./memory.js').toNativeMemory(memory, agentName),
          ...output.config,
          ...require('./skills.js').toNativeSkills(skills),
          ...require('./knowledge.js').toNativeKnowledge(knowledge),
          ...creds.options,
        }),
        ...toNativePolicy(policy),
        builtins: toNativeBuiltins(builtins),
        ...creds.config,
        ...toNativeMcpHooks(mcpServers),
        profiles: toNativeProfiles(profiles),
        namedAgents: toNativeNamedAgents(agents),
        ...toNativeHooks(hooks, inputGuardrails, outputGuardrails),
      },
      tools.map((t) => t._native),
      runTools,
    );
    if (!(built instanceof native.NativeAgent)) throw toError(built);
    this.#native = built;
    this.#parseOutput = output.parse;
  }

  /**
   * Every tool (host tools, then built-ins, in registration order) with its effective level, declared
   * level, status ("offered", "blocked", "above_level", "deferred", "hidden" or "no_network") and whether its calls
   * go to the approval handler. MCP tools appear once their server was listed (a run lists it before
   * its first model request).
   */
  listTools() {
    return toToolListing(this.#native.listTools());
  }

  /**
   * The same agent under another policy, keeping its sub-agents (and its model, instructions, tools,
   * MCP servers and settings); this agent is unchanged. A sub-agent spawned before is re-admitted
   * against the new policy's reach when it is followed up: a level dropped to narrows it, a directory
   * no longer held refuses the follow-up.
   * @param {object} policy as `new Agent({policy})` takes it, e.g. `{level: "read"}`
   * @returns {Agent}
   */
  withPolicy(policy) {
    if (policy === null || typeof policy !== 'object' || Array.isArray(policy)) {
      throw new TypeError(`Agent.withPolicy: policy must be an object such as {level: "read"}, got ${describe(policy)}`);
    }
    const { policy: config, approvals } = toNativePolicy(policy);
    const built = this.#native.withPolicy(config, approvals);
    if (!(built instanceof native.NativeAgent)) throw toError(built);
    const narrowed = new Agent({ [FROM_NATIVE]: built });
    narrowed.#parseOutput = this.#parseOutput;
    return narrowed;
  }

  /**
   * Connects the MCP servers not yet connected and re-lists those that changed, as a run does before
   * each model request; `listTools()` then shows their tools. A server that fails is reported
   * unavailable (to the model, in the catalog), not thrown.
   */
  async refreshTools() {
    await this.#native.refreshTools();
  }

  /**
   * Runs the agent like {@link Agent#run}, yielding its events as they happen; the last is
   * `{type: "run_finished", usage, result}`. A failed run throws its error after the events before it.
   * Leaving the loop early cancels the run; so does aborting `options.signal` (an AbortSignal), even
   * while no event comes (a model request in flight): the iteration then throws a CancelledError.
   * @param {string} input
   * @param {{signal?: AbortSignal}} [options]
   */
  stream(input, options = {}) {
    // What the iteration holds (its run's context, its feed), released however it ends: run to its end
    // or returned (the generator's finally), aborted (the signal), or dropped unfinished (collected).
    const held = {
      context: undefined,
      feed: undefined,
      release() {
        this.feed?.cancel();
        if (this.context !== undefined) CONTEXTS.delete(this.context);
        this.context = undefined;
      },
    };
    const events = this.#stream(input, options, held);
    ABANDONED.register(events, held, held);
    return events;
  }

  async *#stream(input, options, held) {
    const [text, messages] = runInput('Agent.stream', input);
    const signal = cancelSignal('Agent.stream', options);
    held.context = enterContext(options);
    try {
      held.feed = this.#native.stream(text, messages, held.context);
    } catch (e) {
      held.release();
      throw e;
    }
    const feed = held.feed;
    const abort = () => held.release();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      for (;;) {
        if (signal?.aborted) throw new CancelledError('the run was cancelled (its AbortSignal was aborted)');
        // The next event and those already waiting behind it, in one crossing; none: the run is over.
        const batch = JSON.parse(await feed.next());
        // A cancelled feed ends: the abort, not the run, ended it.
        if (signal?.aborted) throw new CancelledError('the run was cancelled (its AbortSignal was aborted)');
        if (batch.length === 0) return;
        for (const envelope of batch) {
          if (!envelope.ok) throw toError(envelope.error);
          yield toEvent(envelope.event, this.#parseOutput);
          if (signal?.aborted) throw new CancelledError('the run was cancelled (its AbortSignal was aborted)');
        }
      }
    } finally {
      signal?.removeEventListener('abort', abort);
      held.release();
      ABANDONED.unregister(held);
    }
  }

  /**
   * Runs the agent from one user message to the final answer. Aborting `options.signal` (an
   * AbortSignal) cancels the run, its HTTP request and its tools; the promise rejects with a
   * CancelledError. A result (or, with a signal, any of the run's events) whose JSON text would pass
   * V8's string limit (about 512 MiB) rejects with EventTooLargeError.
   * @param {string} input
   * @param {{signal?: AbortSignal}} [options]
   */
  async run(input, options = {}) {
    const [text, messages] = runInput('Agent.run', input);
    if (cancelSignal('Agent.run', options)) {
      // A cancellable run is the stream's run, to its result. Iterated to its end, not left at
      // run_finished: leaving would cancel what the run still winds down (its background tasks'
      // cooperative cancellation).
      let result;
      for await (const event of this.stream(input, options)) {
        if (event.type === 'run_finished') result = event.result;
      }
      if (result === undefined) throw new CancelledError('the run ended without a result');
      return result;
    }
    const context = enterContext(options);
    let envelope;
    try {
      envelope = JSON.parse(await this.#native.run(text, messages, context));
    } finally {
      if (context !== undefined) CONTEXTS.delete(context);
    }
    if (!envelope.ok) throw toError(envelope.error);
    return toRunResult(envelope.result, this.#parseOutput);
  }
}

/** Every option `run` and `stream` read; any other key is refused by name (a misspelt `signal` would
 * otherwise leave a run that cannot be cancelled). */
const RUN_OPTIONS = ['signal', 'context'];

/** `options.signal` of run/stream: an AbortSignal, or undefined; anything else is a TypeError. */
function cancelSignal(where, options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${where}: options must be an object, got ${describe(options)}`);
  }
  refuseUnknown(where, options, RUN_OPTIONS);
  const { signal } = options;
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) {
    throw new TypeError(`${where}: options.signal must be an AbortSignal, got ${describe(signal)}`);
  }
  return signal;
}

/** The loop's settings as the core's AgentOptions (snake_case JSON), or undefined when none is set. */
function loopOptions({
  maxConcurrency,
  maxTokens,
  maxCost,
  prices,
  checklist,
  checklistNudgeCap,
  background,
  heartbeat,
  scratchpad,
  vision,
}, tooling = {}) {
  // `tooling`: the MCP servers and deferral settings, already in the core's form (mcp.js).
  const options = { ...tooling };
  for (const [key, value] of [
    ['background', background],
    ['scratchpad', scratchpad],
    ['vision', vision],
  ]) {
    if (value == null) continue;
    if (typeof value !== 'boolean') throw new TypeError(`Agent: ${key} must be a boolean, got ${describe(value)}`);
    options[key] = value;
  }
  if (heartbeat != null) options.heartbeat_secs = heartbeat;
  if (maxConcurrency != null) options.max_concurrency = maxConcurrency;
  if (checklist != null) {
    if (typeof checklist !== 'boolean') throw new TypeError(`Agent: checklist must be a boolean, got ${describe(checklist)}`);
    options.checklist = checklist;
  }
  if (checklistNudgeCap != null) options.checklist_nudge_cap = checklistNudgeCap;
  const budget = {};
  if (maxTokens != null) budget.max_tokens = maxTokens;
  if (maxCost != null) budget.max_cost = maxCost;
  if (Object.keys(budget).length > 0) options.budget = budget;
  if (prices != null) {
    if (typeof prices !== 'object') throw new TypeError(`Agent: prices must be an object, got ${describe(prices)}`);
    options.prices = {};
    for (const [name, p] of Object.entries(prices)) {
      options.prices[name] = {
        input_per_mtok: p.inputPerMtok ?? 0,
        output_per_mtok: p.outputPerMtok ?? 0,
        cache_read_per_mtok: p.cacheReadPerMtok ?? 0,
        cache_write_per_mtok: p.cacheWritePerMtok ?? 0,
      };
    }
  }
  return Object.keys(options).length > 0 ? JSON.stringify(options) : undefined;
}

function toUsage(u) {
  return {
    requests: u.requests,
    inputTokens: u.input_tokens,
    outputTokens: u.output_tokens,
    cacheReadTokens: u.cache_read_tokens,
    cacheWriteTokens: u.cache_write_tokens,
  };
}

/** A core event (snake_case) as a JS object: `type` keeps the core's name, fields are camelCase. */
function toEvent(e, parseOutput) {
  const out = {};
  for (const [key, value] of Object.entries(e)) {
    const camel = key.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    out[camel] = value;
  }
  if (e.usage) out.usage = toUsage(e.usage);
  if (e.type === 'run_finished') out.result = toRunResult(e.result, parseOutput);
  if (e.type === 'approval_requested') out.request = toApprovalRequest(e.request);
  return out;
}

function toRunResult(r, parseOutput) {
  const structured = r.structured_output;
  return {
    output: r.output,
    structuredOutput: structured == null ? undefined : parseOutput ? parseOutput(structured) : structured,
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
    stopReason: r.stop_reason ?? 'end',
    cost: r.cost ?? undefined,
    openItems: (r.open_items || []).map((i) => ({
      id: i.id,
      text: i.text,
      status: i.status,
      reason: i.reason ?? undefined,
      task: i.task ?? undefined,
    })),
    messages: r.messages.map(toMessage),
  };
}

function toMessage(m) {
  switch (m.role) {
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        toolCalls: m.tool_calls.map((c) =>
          c.from_text ? { id: c.id, name: c.name, arguments: c.arguments, fromText: true }
            : { id: c.id, name: c.name, arguments: c.arguments }),
      };
    case 'tool':
      return m.parts
        ? { role: 'tool', callId: m.call_id, name: m.name, content: m.content, isError: m.is_error, parts: m.parts }
        : { role: 'tool', callId: m.call_id, name: m.name, content: m.content, isError: m.is_error };
    default:
      return { ...m };
  }
}

/**
 * A Message (camelCase, as `result.messages` holds them) in the core's form; the core checks it. A
 * provider entry's items go as they are; anything else has its keys made snake_case.
 */
function fromMessage(m) {
  if (m === null || typeof m !== 'object' || Array.isArray(m)) return m;
  if (m.role === 'provider') return { role: 'provider', wire: m.wire, items: m.items };
  const out = {};
  for (const [k, v] of Object.entries(m)) {
    const key = k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    out[key] = key === 'tool_calls' && Array.isArray(v) ? v.map(fromMessage) : v;
  }
  return out;
}

module.exports = {
  Agent,
  Text: content.Text,
  Image: content.Image,
  File: content.File,
  InvalidMessageError,
  HookFailedError,
  GuardrailTrippedError,
  HookContext,
  McpServer,
  Model,
  OpenAIChat,
  OpenAIResponses,
  Anthropic,
  BudgetError,
  TaskContext,
  /** The context a tool call gets (the second argument of `run`): the same class as TaskContext. */
  ToolContext: TaskContext,
  Credentials: require('./credentials.js').Credentials,
  tool,
  AmbitError,
  ConfigError,
  ModelError,
  MaxTurnsError,
  OutputTruncatedError,
  EventTooLargeError,
  OutputInvalidError,
  CancelledError,
  InternalError,
  /** wireName(name, maxBytes = 64): the name the model sees for a tool; straight from the core. */
  wireName: native.wireName,
};
// The work ledger (after the exports above: ledger.js takes AmbitError from them).
Object.assign(module.exports, require('./ledger.js'));
// Memory (after the exports above, for the same reason).
{
  const { toNativeMemory: _, ...memory } = require('./memory.js');
  Object.assign(module.exports, memory);
}
// Knowledge (after the exports above, for the same reason).
{
  const { toNativeKnowledge: _, ...knowledge } = require('./knowledge.js');
  Object.assign(module.exports, knowledge);
}
// Test models (after the exports above: testmodel.js takes Model from models.js).
Object.assign(module.exports, require('./testmodel.js'));
// Sessions (sessions.js takes Agent, AmbitError and these two converters from the exports).
Object.defineProperty(module.exports, '_toRunResult', { value: toRunResult });
// For Sessions: a session run's context, kept here like a run's.
Object.defineProperty(module.exports, '_enterContext', { value: enterContext });
Object.defineProperty(module.exports, '_leaveContext', { value: (id) => id !== undefined && CONTEXTS.delete(id) });
Object.defineProperty(module.exports, '_toError', { value: toError });
// For the tests: how many run contexts are held now.
Object.defineProperty(module.exports, '_heldContexts', { value: () => CONTEXTS.size });
Object.assign(module.exports, require('./sessions.js'));
// Routines (after Sessions and the ledger, which its Runner takes).
Object.assign(module.exports, require('./routines.js'));
// Telemetry (OTLP export of the core's spans).
Object.assign(module.exports, require('./telemetry.js'));
