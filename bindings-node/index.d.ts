// Type declarations of the ambit Node package (hand-written; the native layer's generated
// declarations are in native/index.d.ts and are not part of the public API).

/** A JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A JSON Schema object describing a tool's arguments (`"type": "object"`). */
export type JsonSchema = { [key: string]: JsonValue };

/** The error codes, the same in every language. */
export type ErrorCode =
  | 'config'
  | 'model_http'
  | 'model_transport'
  | 'model_response'
  | 'max_turns'
  | 'budget_exceeded'
  | 'output_truncated'
  | 'cancelled';

/** Every error ambit throws. `code` is the core's stable machine-readable code. */
export declare class AmbitError extends Error {
  readonly code: ErrorCode | string;
  constructor(message: string, code: ErrorCode | string, options?: ErrorOptions);
}

/** The agent or a tool was configured wrongly (duplicate tool names, a schema that is not an object, …). */
export declare class ConfigError extends AmbitError {
  readonly code: 'config';
  constructor(message: string, options?: ErrorOptions);
}

/** The model provider failed, after retries where a retry made sense. */
export declare class ModelError extends AmbitError {
  readonly code: 'model_http' | 'model_transport' | 'model_response';
  /** The HTTP status the provider answered with, for `model_http`. */
  readonly status: number | undefined;
  constructor(
    message: string,
    code?: 'model_http' | 'model_transport' | 'model_response',
    status?: number,
    options?: ErrorOptions,
  );
}

/** The run used its turn budget without the model giving a final answer. */
export declare class MaxTurnsError extends AmbitError {
  readonly code: 'max_turns';
  /** What the run used before it stopped. */
  readonly usage: Usage | undefined;
  constructor(message: string, options?: ErrorOptions);
}

/** The run was cancelled. */
export declare class CancelledError extends AmbitError {
  readonly code: 'cancelled';
  constructor(message: string, options?: ErrorOptions);
}

/** A bug in ambit: a panic in the native core was caught at the boundary (code "internal"). */
export declare class InternalError extends AmbitError {
  readonly code: 'internal';
  constructor(message: string, options?: ErrorOptions);
}

export interface ModelOptions {
  /** Defaults to `OPENAI_BASE_URL` (Anthropic: `ANTHROPIC_BASE_URL` + `/v1`), else the vendor's URL. */
  baseUrl?: string;
  /** Defaults to `OPENAI_API_KEY` (Anthropic: `ANTHROPIC_API_KEY`), else no key. */
  apiKey?: string;
  /** Stream answers (SSE); text reaches `stream()` events as it is written. Default false. */
  stream?: boolean;
  /** The limit on one HTTP request in seconds, retries not included (default 600). */
  timeout?: number;
  /** Attempts after the first on 408, 409, 429, 5xx and connection errors, except errors the same request gets again (default 2). */
  maxRetries?: number;
  /**
   * A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the others),
   * for an endpoint that holds names shorter: longer names reach it cut to fit. Above the wire's limit,
   * a `ConfigError` naming `max_tool_name_bytes`.
   */
  maxToolNameBytes?: number;
  /**
   * The tokens the model's context window holds (default: the model family's, or 32,768 for a model
   * the core does not know); a session's auto-compaction fires at a share of it.
   */
  contextWindow?: number;
  /** The most tokens one answer may have (at least 1): Chat Completions `max_completion_tokens`, Responses `max_output_tokens`, Anthropic `max_tokens`. */
  maxOutputTokens?: number;
  /** Sampling temperature, 0 to 2. Not on Anthropic (its API has none): a `ConfigError` naming it. */
  temperature?: number;
  /** Nucleus sampling, 0 to 1. Not on Anthropic. */
  topP?: number;
  /** Texts that end the answer when written: 1 to 4, none empty. Not on Responses. */
  stop?: string[];
  /** A seed for repeatable sampling. Chat Completions only. */
  seed?: number;
  /** Which tool use the model is asked for (sent only with a request that offers tools). */
  toolChoice?: ToolChoice;
  /** Whether the model may ask for several tool calls in one answer (Anthropic: `disable_parallel_tool_use`). */
  parallelToolCalls?: boolean;
  /**
   * Chat Completions only: `'auto'` reads a tool call a model wrote as text (bare or fenced JSON,
   * `<tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`; only tools offered in that request; never when the
   * server sent calls) as a call, marked `fromText` in its `tool_call_requested` event; `'constrained'`
   * also asks the server (llama.cpp) to constrain the answer to one such call or a JSON string.
   */
  textToolCalls?: TextToolCalls;
  /** How hard a reasoning model thinks: `none` … `max` (Anthropic `low` … `max`, its `output_config.effort`). */
  reasoningEffort?: 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';
  /** Anthropic only: extended thinking with this many tokens (at least 1,024, below the answer's max tokens). */
  thinkingBudget?: number;
  /**
   * Anthropic only: prompt caching of the stable prefix (`cache_control` on the tools and the system
   * prompt), on unless `false`; cache writes and reads are counted in the usage and cost.
   */
  promptCaching?: boolean;
  /**
   * OpenAI wires: strict schemas, on unless `false`. A function tool, or a typed answer's JSON Schema,
   * in strict mode's subset (every property required, `additionalProperties: false` on every object, no
   * `default`, …) is sent with `strict: true`, so the server decodes only what matches it; any other is
   * sent without it. Not on Anthropic.
   */
  strict?: boolean;
  /**
   * Responses only: whether the server keeps the response (`store`). `false` is stateless use: the
   * requests also ask for the reasoning items' encrypted content, sent back on the next request (a
   * reasoning model only: OpenAI refuses that for other models).
   */
  store?: boolean;
  /**
   * Headers every request carries, replacing the wire's own of those names: Azure OpenAI's `api-key`,
   * `OpenAI-Organization`, `OpenAI-Project`; a name that is not a header's, or one the HTTP exchange sets
   * itself (`content-type`, `host`, …), is a `ConfigError` naming it.
   */
  headers?: Record<string, string>;
  /** Query parameters every request's URL carries: Azure OpenAI's `api-version`. */
  query?: Record<string, string>;
}

/** How an answer's text is read for tool calls (Chat Completions). */
export type TextToolCalls = 'off' | 'auto' | 'constrained';

/**
 * Which tool use the model is asked for: the model decides, must call a tool, must not, or must call the
 * named one. A value out of range, or a setting the wire lacks, is a `ConfigError` naming it (the core's
 * snake_case name, e.g. `top_p`) and the wire, when the agent is built; an unknown option too.
 */
export type ToolChoice = 'auto' | 'required' | 'none' | { name: string };
// `required` and a named tool bind the model's first answer to each user message: once it has called a
// tool since, the requests say `auto` (else it could never end its turn). With Anthropic's extended
// thinking (`thinkingBudget`) only `auto` and `none` are taken: the others are a `ConfigError`.

/** @deprecated use {@link ModelOptions} */
export type OpenAIChatOptions = ModelOptions;

/** What every wire takes; use {@link OpenAIChat}, {@link Anthropic} or {@link OpenAIResponses}. */
export declare class Model {
  readonly wire: 'openai_chat' | 'anthropic' | 'openai_responses';
  readonly model: string;
  readonly baseUrl: string | undefined;
  readonly apiKey: string | undefined;
  readonly stream: boolean;
  readonly timeout: number | undefined;
  readonly maxRetries: number | undefined;
  readonly maxToolNameBytes: number | undefined;
  readonly contextWindow: number | undefined;
  readonly maxOutputTokens: number | undefined;
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  readonly stop: string[] | undefined;
  readonly seed: number | undefined;
  readonly toolChoice: ToolChoice | undefined;
  readonly parallelToolCalls: boolean | undefined;
  readonly textToolCalls: TextToolCalls | undefined;
  readonly reasoningEffort: ModelOptions['reasoningEffort'] | undefined;
  readonly thinkingBudget: number | undefined;
  readonly promptCaching: boolean | undefined;
  readonly strict: boolean | undefined;
  readonly store: boolean | undefined;
  readonly headers: Record<string, string> | undefined;
  readonly query: Record<string, string> | undefined;
}

/** A model on the OpenAI Chat Completions wire (any OpenAI-compatible server by `baseUrl`). */
export declare class OpenAIChat extends Model {
  readonly wire: 'openai_chat';
  constructor(model: string, options?: ModelOptions);
}

/** A model on the OpenAI Responses wire. */
export declare class OpenAIResponses extends Model {
  readonly wire: 'openai_responses';
  constructor(model: string, options?: ModelOptions);
}

/** A model on the Anthropic Messages wire (`baseUrl` ends in `/v1`). */
export declare class Anthropic extends Model {
  readonly wire: 'anthropic';
  /** The most tokens one answer may have (default 4096). */
  readonly maxTokens: number | undefined;
  constructor(model: string, options?: ModelOptions & { maxTokens?: number });
}

/** A tool call in a test model's reply. `id` defaults to `call_<request>_<index>`. */
export interface ReplyCall {
  name: string;
  arguments?: { [key: string]: JsonValue };
  id?: string;
}

/** One reply of a test model: a string (a text reply), or text, tool calls, or both, with token counts. */
export type Reply =
  | string
  | { content?: string; toolCalls?: ReplyCall[]; usage?: { inputTokens?: number; outputTokens?: number } };

/** What a {@link FunctionModel} is asked. */
export interface TestRequest {
  /** The request's number in the model's life, from 1. */
  index: number;
  wire: 'openai_chat' | 'anthropic' | 'openai_responses';
  model: string;
  instructions: string | null;
  /** The conversation so far, provider-neutral (snake_case, as the core writes it). */
  messages: Array<{ [key: string]: JsonValue }>;
  /** The tools offered: `name`, `description`, `parameters`. */
  tools: Array<{ name: string; description: string; parameters: JsonSchema; [key: string]: JsonValue }>;
  /** The wire's request body, as a hosted model would get it. */
  body: { [key: string]: JsonValue };
}

/** The settings of a test model. */
export interface TestModelOptions {
  /** The wire it speaks (default `openai_chat`). */
  wire?: 'openai_chat' | 'anthropic' | 'openai_responses';
  /** The name it reports (default `test-model`). */
  model?: string;
  /** Stream its answers as the wire's server-sent events. */
  stream?: boolean;
}

/**
 * A model for tests, answering from a script: the n-th request gets the n-th reply. It reaches no
 * network, yet its replies go through the wire's real decoder. A request past the script fails the run
 * (`ModelError`, code `model_response`).
 */
export declare class TestModel extends Model {
  constructor(replies: Reply[], options?: TestModelOptions);
}

/** A model for tests answering with a function of each request (sync or async); a throw fails the run. */
export declare class FunctionModel extends Model {
  constructor(fn: (request: TestRequest) => Reply | Promise<Reply>, options?: TestModelOptions);
}

/** The run went past a hard budget. */
export declare class BudgetError extends AmbitError {
  readonly code: 'budget_exceeded';
  /** Which budget: tokens or cost. */
  readonly budget: 'tokens' | 'cost';
  readonly limit: number;
  readonly spent: number;
  /** What the run cost, when the price table has the model. */
  readonly cost: number | undefined;
  /** What the run used before it stopped. */
  readonly usage: Usage;
}

/**
 * The model's final answer did not match the agent's `outputType` after the wrong answers went back to
 * it `retries` times.
 */
/**
 * A message history given as a run's input breaks a rule (code "invalid_message"): an unknown role, a
 * field of the wrong type, a tool result that answers no call. `index` is the message's place in the
 * list; `field` the field that is wrong as the core's form spells it (`role`, `call_id`,
 * `tool_calls[0].id`; empty for the whole entry). Nothing was sent.
 */
/** A hook or guardrail threw, or answered what its point does not take (code "hook_failed"). */
export declare class HookFailedError extends AmbitError {
  readonly code: 'hook_failed';
  /** The hook's (or guardrail's) name. */
  readonly hook: string;
  /** Where it ran: a hook point, `input_guardrail` or `output_guardrail`. */
  readonly point: string;
}

/** A guardrail tripped (code "guardrail_tripped"). */
export declare class GuardrailTrippedError extends AmbitError {
  readonly code: 'guardrail_tripped';
  readonly guardrail: string;
  readonly kind: 'input' | 'output';
  /** The `info` of the guardrail's verdict. */
  readonly verdict: JsonValue;
  /** What the run used. */
  readonly usage?: Usage;
}

export declare class InvalidMessageError extends AmbitError {
  readonly code: 'invalid_message';
  readonly index: number;
  readonly field: string;
}

export declare class OutputInvalidError extends AmbitError {
  readonly code: 'output_invalid';
  /** The last answer's text, as the model gave it. */
  readonly attempt: string;
  /** How many times a wrong answer went back to the model. */
  readonly retries: number;
  /** What the run used. */
  readonly usage: Usage;
}
/**
 * A streamed event too large for a JavaScript string (code "event_too_large", Node only): its JSON text
 * passes V8's string limit (about 512 MiB). The stream ends with it, after every event before it; the
 * run is cancelled. `Agent.run` rejects with it too when its result's text would not fit (`event`:
 * "run result"); a run's error too long keeps its own class, its message shortened.
 */
export declare class EventTooLargeError extends AmbitError {
  readonly code: 'event_too_large';
  /** The event's type (`tool_finished`, …), or `run result` (from `Agent.run`). */
  readonly event: string;
  /** The length of the event's JSON text, in UTF-16 units. */
  readonly size: number;
  /** The most one event's text may have. */
  readonly limit: number;
}

/**
 * The model's output token limit cut its answer in the middle of tool calls (code "output_truncated"):
 * their arguments are incomplete, so none of them ran.
 */
export declare class OutputTruncatedError extends AmbitError {
  readonly code: 'output_truncated';
  /** The names of the cut calls' tools. */
  readonly tools: string[];
  /** What the run used, the cut answer included. */
  readonly usage: Usage;
}

/**
 * Why the model stopped answering: it ended, asked for tool calls, was cut by the output token limit
 * (`length`), by the provider's content filter, refused, or another reason.
 */
export type StopReason = 'end' | 'tool_calls' | 'length' | 'content_filter' | 'refusal' | 'other';

/** What a model costs per million tokens, in any unit (the cost budget uses the same unit). */
export interface Price {
  inputPerMtok?: number;
  outputPerMtok?: number;
  cacheReadPerMtok?: number;
  cacheWritePerMtok?: number;
}

/** One item of a run's checklist. */
export interface ChecklistItem {
  id: number;
  text: string;
  status: 'pending' | 'in_progress' | 'deferred' | 'completed' | 'canceled';
  reason: string | undefined;
  task: string | undefined;
}

/** One event of a run, as `Agent.stream` yields it. */
export type AgentEvent =
  | { type: 'run_started'; input: string }
  | { type: 'model_request'; turn: number }
  | { type: 'text_delta'; text: string }
  | { type: 'model_response'; turn: number; usage: Usage; cost: number | null; stopReason: StopReason }
  | { type: 'tool_call_requested'; id: string; name: string; arguments: JsonValue; fromText: boolean }
  | { type: 'tool_started'; id: string; name: string }
  | { type: 'tool_finished'; id: string; name: string; result: string; isError: boolean }
  | { type: 'tool_refused'; id: string; name: string; reason: string }
  | { type: 'approval_requested'; request: PendingApproval }
  | { type: 'checklist_nudge'; nudge: number; openItems: string[] }
  | { type: 'background_task_started'; taskId: string; callId: string; name: string }
  | { type: 'background_task_progress'; taskId: string; note: string }
  | { type: 'background_task_reported'; taskId: string; name: string; result: string; isError: boolean }
  | { type: 'guardrail_checked'; guardrail: string; kind: 'input' | 'output'; tripped: boolean; info: JsonValue }
  | { type: 'run_finished'; usage: Usage; result: RunResult };

export interface ToolDefinition<Args extends Record<string, any> = Record<string, any>, Ctx = unknown> {
  /** The name the model calls the tool by; unique within an agent. */
  name: string;
  /** What the tool does, for the model. */
  description?: string;
  /**
   * The arguments' type: a JSON Schema (an object schema, checked when the agent is built), or a zod (4)
   * schema, whose JSON Schema (its input side) the core checks every call by and whose `parse` then turns
   * the checked arguments into the value `run` gets (transforms and refinements included: a parse error
   * is the call's error result). With zod, `run`'s argument type is inferred from the schema.
   */
  parameters: JsonSchema | ZodLike<Args>;
  /**
   * Runs the tool on the arguments the model sent; sync or async. A string result reaches the model
   * as it is, anything else as JSON. A thrown error becomes an error result the model sees
   * (`Error: tool '<name>' failed: <message>`); the run goes on.
   */
  /**
   * `ctx` is the call's context: the run's `context` (`ctx.context`, typed `Ctx`), the background task
   * the call runs in (progress notes and the cancellation token) and its credentials.
   */
  run: (args: Args, ctx: TaskContext<Ctx>) => unknown | Promise<unknown>;
  /**
   * The lowest level the tool may run at. Undeclared: `"unrestricted"` (the SDK cannot know what a
   * host function does). An unknown level is a ConfigError when the agent is built.
   */
  level?: Level;
  /** Every call goes to the approval handler, whatever the level (default false). */
  requiresApproval?: boolean;
  /** The credential aliases the tool reads from its context (`ctx.credential(alias)`), never from its arguments. */
  credentials?: string[] | string;
  /** String arguments whose blank value is itself the value (kept, not read as left out). */
  allowBlank?: string[] | string;
  /**
   * Running a call twice has the effect of running it once (default false): in a session, a call a
   * crash interrupted is run again on resume; any other tool's is reported to the model as of unknown
   * outcome, never re-run.
   */
  idempotent?: boolean;
}

/** A tool made by {@link tool}. */
export interface Tool<Args extends Record<string, any> = Record<string, any>, Ctx = unknown> {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchema;
  readonly run: (args: Args, ctx: TaskContext<Ctx>) => unknown | Promise<unknown>;
  readonly credentials: string[] | undefined;
  readonly level: Level | undefined;
  readonly requiresApproval: boolean | undefined;
  readonly allowBlank: string[] | undefined;
  readonly idempotent: boolean | undefined;
}

/** Declares a host tool. Throws a TypeError when `name` or `run` is missing or of the wrong type. */
/** A zod (4) schema, or anything with `toJSONSchema()` and `parse`: `T` is what `parse` makes. */
export interface ZodLike<T = unknown> {
  toJSONSchema(params?: { io?: 'input' | 'output' }): Record<string, unknown>;
  parse(value: unknown): T;
}

export declare function tool<Args extends Record<string, any> = Record<string, any>, Ctx = unknown>(
  definition: ToolDefinition<Args, Ctx>,
): Tool<Args, Ctx>;

/**
 * The name a model sees for the tool `name` on a wire that takes names of at most `maxBytes` bytes
 * (default 64, Chat Completions; 128 on Anthropic and Responses): the name itself when the wire takes
 * it, else its head, `_` and 12 hex digits of its SHA-256.
 */
export declare function wireName(name: string, maxBytes?: number): string;

export interface AgentOptions<Ctx = unknown> {
  model: Model;
  /** The most tool calls of one turn running at the same time (default 8); results keep the model's order. */
  maxConcurrency?: number;
  /** Hard budget: the most tokens (input, output, cache-read and cache-write together) a run may use. */
  maxTokens?: number;
  /** Hard budget: the most a run may cost, by `prices`. */
  maxCost?: number;
  /** Prices per model name. */
  prices?: Record<string, Price>;
  /**
   * The checklist tools (checklist_add, checklist_edit, checklist_read) and the rule that a run cannot
   * end its turn while an item is pending or in_progress. Default false.
   */
  checklist?: boolean;
  /** How many times the loop nudges the model about open items before the run ends anyway (default 3). */
  checklistNudgeCap?: number;
  /**
   * Background calls: every tool gains an optional `background` parameter; such a call returns a task id
   * at once and its result arrives as its own turn (tools `task_list`, `task_cancel`). Default false.
   */
  background?: boolean;
  /** Seconds a background task may stay silent before it is failed as dead (default 300). */
  heartbeat?: number;
  /**
   * The scratchpad: every tool gains an optional `scratchpad` parameter that saves its output under a name
   * instead of returning it, and the scratchpad tools. Default false.
   */
  scratchpad?: boolean;
  /** The model takes images: adds `image_render`, which shows it an image held as base64 or in a scratchpad entry. Default false. */
  vision?: boolean;
  /** The system instructions sent with every request. */
  instructions?: string;
  tools?: Tool<any, Ctx>[];
  /** The most model requests one run may make (default 10, at least 1). */
  maxTurns?: number;
  /**
   * The permission policy. Without one the agent runs at `"unrestricted"` with approvals off. Unknown
   * keys or values are a ConfigError naming them.
   */
  policy?: Policy;
  /** Built-in tools to register, by name (registered after `tools`); an unknown name is a ConfigError. */
  builtins?: BuiltinName[] | BuiltinName;
  /** MCP servers, connected before the first model request; their tools are `mcp__<server>__<tool>`. */
  mcpServers?: McpServerConfig[];
  /** Which tools wait in the catalog until the model loads them (MCP tools are deferred by default). */
  deferral?: DeferralOptions;
  /**
   * Sub-agents: the tools agent_spawn, agent_list, agent_followup, agent_steer and agent_delete. A
   * sub-agent is never wider than its parent (level, directories, network, tools); a wider request is
   * refused by name. `true` takes the defaults.
   */
  subagents?: boolean | SubagentOptions;
  /** The work ledger's four tools bound to one run of a routine: `ledger.forRoutine(scope, {runId, routineId})`. */
  ledger?: RoutineLedger;
  /** The run's tools of a routine (`report_outcome`, `list_my_routines`, `list_my_outcomes`): the RunContext a Runner's agent factory is given. */
  routine?: RunContext;
  /**
   * A memory store (`await Memory.open(url)`), given with `agentName`: the agent's namespace in it. The
   * agent gets the memory_* tools and its baseline (pinned, then highest salience) after the instructions.
   */
  memory?: Memory;
  /** The agent's name in its memory store; required with `memory`. */
  agentName?: string;
  /**
   * The final answer's type: the answer is JSON matching `schema` (an object's JSON Schema, or a zod 4
   * schema, whose `toJSONSchema()` and `parse` are used), asked of the provider natively where the wire has it (Chat
   * Completions, Responses) and through a `final_answer` tool elsewhere; a wrong answer goes back to the
   * model up to `retries` times (default 2), then the run throws `OutputInvalidError`. `parse` turns the
   * checked JSON into your type (`result.structuredOutput`), e.g. `(v) => Weather.parse(v)`.
   */
  outputType?: OutputType;
  /**
   * Skills directories (Agent Skills format: `<dir>/<name>/SKILL.md`): a bounded index of the skills
   * after the instructions, skill_read and skill_search; with `agentManaged` also skill_write, skill_edit
   * and skill_delete (never given to a sub-agent).
   */
  skills?: SkillsOptions;
  /** A knowledge directory (`new Knowledge(dir)`): knowledge_list and knowledge_read. */
  knowledge?: Knowledge;
  /** The credential broker: aliases tools declare, the shell's and web_fetch's delivery rules. */
  credentials?: Credentials;
  /**
   * Profiles `agent_spawn`'s `profile` may name (`{fast: new OpenAIChat('gpt-4.1-nano', {settings})}`): a
   * sub-agent spawned on one runs on that model on every follow-up. A profile never widens its level,
   * scope, network or tools. Names: letters, digits, `_` and `-`.
   */
  profiles?: Record<string, Model>;
  /**
   * Named agents (`{researcher: {agent, description}}`): adds `agent_list_named` (each name with its
   * description: when and how to use it) and `agent_delegate {agent, prompt}`. The named agent runs with
   * its own instructions, tools and model, inside this agent's reach (level, directories and network
   * both hold), and reports back headed by its name and that reach.
   */
  agents?: Record<string, NamedAgent<any>>;
  /**
   * Hooks, run at their point of every run (see {@link Hook}); those of one point run in the order given.
   * A hook that throws ends the run with HookFailedError naming it.
   */
  hooks?: Hook<Ctx>[];
  /**
   * Checks of the run's input, run beside the first model request; a tripped one ends the run with
   * GuardrailTrippedError before any tool runs. `payload`: `{input: the last user message, messages}`.
   */
  inputGuardrails?: Guardrail<Ctx>[];
  /** Checks of the final answer (`payload`: `{output, structured_output}`) before the run returns it. */
  outputGuardrails?: Guardrail<Ctx>[];
}

/** Where a hook runs. */
export type HookPoint =
  | 'run_start'
  | 'run_end'
  | 'before_model_request'
  | 'after_model_response'
  | 'before_tool_call'
  | 'after_tool_call';

/** What a hook or guardrail knows of its run: its name and the run's context. */
export declare class HookContext<Ctx = unknown> {
  readonly name: string;
  /** The value given to `agent.run(input, {context})`; a run given none throws ConfigError. */
  readonly context: Ctx;
}

/**
 * A hook's answer: nothing (go on), `{replace: value}` (go on with it instead) or, before a tool call,
 * `{refuse: reason}` (the tool does not run; the model sees the reason).
 */
export type HookResult = void | undefined | null | { replace: JsonValue } | { refuse: string };

/**
 * A hook. `payload` is the core's JSON (snake_case keys), what the model sees (tool results after the
 * credential redactor: `[credential:alias]`, never a value):
 * - `run_start`: `{input: messages}`; `run_end`: the result (`output`, `tool_calls`, `usage`, …); both observe.
 * - `before_model_request`: `{turn, instructions, messages, tools}`; replace `{instructions?, messages?}`.
 * - `after_model_response`: `{turn, text, tool_calls: [{id, name, arguments}]}`; replace `{text?, tool_calls?}`.
 * - `before_tool_call`: `{id, name, arguments}`; replace with the new arguments, or refuse.
 * - `after_tool_call`: `{id, name, arguments, result, is_error}`; replace with the new result text.
 */
export interface Hook<Ctx = unknown> {
  point: HookPoint;
  /** Named in HookFailedError (default: the function's name). */
  name?: string;
  run: (ctx: HookContext<Ctx>, payload: { [key: string]: JsonValue }) => HookResult | Promise<HookResult>;
}

/** A guardrail's answer: `tripped` stops the run; `info` is carried by the error (`verdict`) and the event. */
export interface GuardrailVerdict {
  tripped: boolean;
  info?: JsonValue;
}

export interface Guardrail<Ctx = unknown> {
  /** Named in GuardrailTrippedError and HookFailedError (default: the function's name). */
  name?: string;
  run: (ctx: HookContext<Ctx>, payload: { [key: string]: JsonValue }) => GuardrailVerdict | Promise<GuardrailVerdict>;
}

/** An agent another may hand work to by name (`new Agent({agents: {name: {agent, description}}})`). */
export interface NamedAgent<Ctx = unknown> {
  agent: Agent<Ctx>;
  /** When and how to use it: the caller's model reads it in `agent_list_named`. */
  description: string;
}

/** The final answer's type (`new Agent({outputType})`). */
export interface OutputType {
  /** 1 to 64 letters, digits, `_` or `-`. */
  name: string;
  /** A JSON Schema for an object, or a zod schema (anything with `toJSONSchema()` and `parse`). */
  schema: Record<string, unknown> | { toJSONSchema(params?: { io?: "input" | "output" }): Record<string, unknown>; parse(value: unknown): unknown };
  retries?: number;
  parse?: (value: unknown) => unknown;
}

/** An agent's skills directories. */
export interface SkillsOptions {
  /** Directories holding skill folders, absolute or relative to the policy's working directory; a new skill goes to the first. */
  dirs: string | string[];
  /** The agent may write, edit and delete skills (default false). */
  agentManaged?: boolean;
  /** The most skills the per-turn index lists (default 100, at most 1000; 0: no index). */
  indexEntries?: number;
}

/** Sub-agent settings. */
export interface SubagentOptions {
  /** Levels of sub-agents below this agent (default 3; 1: sub-agents cannot spawn; 0: no agent tools). */
  maxDepth?: number;
  /** Whether this agent holds a memory store it may grant sub-agents read access to (default "none"). */
  memory?: 'none' | 'read';
}

/** The built-in tools, registered only when named in `builtins`. */
export type BuiltinName =
  | 'file_read'
  | 'file_find'
  | 'file_search'
  | 'file_edit'
  | 'file_write'
  | 'web_fetch'
  | 'shell_execute';

/** Permission levels, in order: none < read < workspace < unrestricted. */
export type Level = 'none' | 'read' | 'workspace' | 'unrestricted';

/** What a session may do (the core's PolicyConfig, camelCase). Unknown keys or values are a ConfigError naming them. */
export interface Policy {
  /** Default `"unrestricted"`; setting a level is what turns the checks on. */
  level?: Level;
  /** Calls above the level (and of tools marked `requiresApproval`) go to it instead of being refused. */
  approvals?: ((request: PendingApproval) => ResumeDecision | { decision: 'later' } | Promise<ResumeDecision | { decision: 'later' }>) | null | false;
  allowTools?: string[] | string;
  blockTools?: string[] | string;
  levelOverrides?: Record<string, Level>;
  /** Default: the process's current directory. Directories must exist. */
  workingDirectory?: string;
  workspaceDirectories?: string[] | string;
  readableDirectories?: string[] | string;
  confineReads?: boolean;
  network?: 'none' | 'remote' | 'unrestricted';
  /** Addresses or CIDR ranges of this machine or link-local (169.254.0.0/16, fe80::/10: cloud metadata services) that web_fetch may still reach under network "remote". */
  allowLocalAddresses?: string[] | string;
}

/** How a tool that may be deferred ships: listed until loaded, declared from the start, or not at all. */
export type DeferralSetting = 'deferred' | 'eager' | 'hidden';

/** One MCP server. Unknown keys or values are a ConfigError naming them. */
export interface McpServerConfig {
  /** The `<server>` of `mcp__<server>__<tool>`: ASCII letters, digits, `_` or `-`. */
  name: string;
  transport:
    | { type: 'stdio'; command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
    | { type: 'http'; url: string };
  /** `initialize` (2025-11-25, default), `stateless` (2026-07-28) or `auto`. */
  protocol?: 'initialize' | 'stateless' | 'auto';
  /** Believe the server's annotations (`readOnlyHint` gives level `read`). */
  trusted?: boolean;
  /** The level of a tool, by the server's name for it; wins over annotations. Others: `unrestricted`. */
  levels?: Record<string, Level>;
  /** This server's setting; absent: the agent's `deferral.setting`. */
  deferral?: DeferralSetting;
  /** Tools (the server's names) that ship their schemas from the first request under every setting. */
  eagerLoadTools?: string[] | string;
  /** HTTP only: headers sent as given with every request (their values never appear in an error). */
  headers?: Record<string, string>;
  /** HTTP only: headers whose value is the agent's credential of that alias (`credentials`). */
  credentialHeaders?: Record<string, string>;
  /** HTTP only: the alias of a credential sent as `Authorization: Bearer <value>`. */
  bearer?: string;
  /** Stdio only: environment variables whose value is the agent's credential of that alias. */
  credentialEnv?: Record<string, string>;
  /** HTTP only: OAuth 2.1 (the MCP authorization spec) for a server that answers 401. */
  oauth?: OAuthOptions;
  /** Answers the server's requests for the user's input; without it they are declined. */
  onElicit?: (request: ElicitationRequest) => ElicitationAnswer | Promise<ElicitationAnswer>;
}

/** Where an MCP server's OAuth tokens are kept, by key (the server's URL): an opaque text per key. */
export interface TokenStore {
  load(key: string): string | null | undefined | Promise<string | null | undefined>;
  save(key: string, value: string): void | Promise<void>;
  clear(key: string): void | Promise<void>;
}

/**
 * OAuth for an HTTP MCP server: on its 401 the client discovers the authorization server, registers
 * (`clientId` if pre-registered, the `clientMetadataUrl` document if supported, else dynamic
 * registration) and asks for consent: `onAuthorize(url)` gets the authorization URL (open it in a
 * browser) and returns the URL the browser was redirected to. Tokens are refreshed, and re-requested
 * with more scopes on a 403 `insufficient_scope`; they never reach the model, events or the session store.
 */
export interface OAuthOptions {
  grant?: 'authorization_code' | 'client_credentials';
  clientName?: string;
  redirectUri?: string;
  onAuthorize?: (url: string) => string | Promise<string>;
  scopes?: string[];
  clientId?: string;
  /** The alias of the credential holding a pre-registered client's secret. */
  clientSecret?: string;
  /** An HTTPS URL of this client's metadata document, used as its client ID where supported. */
  clientMetadataUrl?: string;
  /**
   * The trusted authorization server (its issuer URL): one the MCP server's metadata names differently
   * is refused. Without it, a `clientSecret` goes only to an authorization server on the MCP server's host.
   */
  issuer?: string;
  /**
   * The most seconds to wait for the token store's refresh guard (another client refreshing), default 30:
   * past it the request fails with `refresh_lock_timeout`, naming the lock.
   */
  refreshLockTimeout?: number;
  /** A path (a JSON file, mode 0600) or a TokenStore; absent: in memory. */
  tokenStore?: string | TokenStore;
}

/** An MCP server asks the user for input: a form (`schema`, a JSON schema) or a URL to visit. */
export interface ElicitationRequest {
  server: string;
  message: string;
  mode: 'form' | 'url';
  schema?: Record<string, unknown> | null;
  url?: string | null;
}

/** An object (accepted, with that content), `decline` or `cancel`. */
export type ElicitationAnswer = Record<string, unknown> | 'accept' | 'decline' | 'cancel';

export interface DeferralOptions {
  /** The install-wide setting (default `deferred`): servers without their own and `deferrableTools` follow it. */
  setting?: DeferralSetting;
  /**
   * `native` (default: the provider's own tool search and deferred loading where the model has it,
   * Anthropic Messages on Claude Opus/Sonnet 4.5+ and OpenAI Responses on GPT-5.4+, else as `append`),
   * `append` (the local catalog, tool_search and tool_load; a loaded schema joins the tools) or `eager`
   * (every schema from the first request).
   */
  strategy?: 'append' | 'eager' | 'native';
  /** Host tools and built-ins that may be deferred (all others are eager). */
  deferrableTools?: string[] | string;
}

type McpServerOptions = Omit<McpServerConfig, 'name' | 'transport' | 'headers' | 'credentialHeaders' | 'bearer' | 'credentialEnv' | 'oauth'>;

/** Makes server configurations. */
export declare const McpServer: {
  stdio(
    name: string,
    command: string,
    args?: string[],
    options?: McpServerOptions & { env?: Record<string, string>; cwd?: string; credentialEnv?: Record<string, string> },
  ): McpServerConfig;
  http(
    name: string,
    url: string,
    options?: McpServerOptions & { headers?: Record<string, string>; credentialHeaders?: Record<string, string>; bearer?: string; oauth?: OAuthOptions },
  ): McpServerConfig;
};

/** One line of the listing API. */
export interface ToolListing {
  name: string;
  /** The level the tool requires after overrides. */
  level: Level;
  /** The level the tool declares. */
  declaredLevel: Level;
  /**
   * `offered`; `blocked` (allow/block lists); `above_level` (approvals off); `deferred` (offered once
   * loaded: in the catalog); `hidden` (the deferral setting keeps it out altogether); `no_network`
   * (needs the network, and the network setting is `none`: withheld).
   */
  status: 'offered' | 'blocked' | 'above_level' | 'deferred' | 'hidden' | 'no_network';
  /** Whether a call goes to the approval handler. */
  approval: boolean;
  /** What confines the tool's calls on this machine (the shell: the kernel's sandbox layers); absent for other tools. */
  confinement?: string;
}

/** One tool call made during a run, as the model saw it. */
export interface ToolCallRecord {
  /** The call id the model gave. */
  id: string;
  name: string;
  /** The arguments as the model sent them (the raw text when it was not JSON). */
  arguments: JsonValue;
  /** The text the model received as the result. */
  result: string;
  /** True when the result is an error (the tool failed, or the call was refused). */
  isError: boolean;
}

/** Tokens used, summed over every model request of a run. */
export interface Usage {
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/**
 * One entry of the conversation, as `result.messages` holds them and `agent.run([...])` takes them back:
 * keep a history yourself by passing an earlier `result.messages` and a new user message. Each call of an
 * assistant message gets its `tool` message (`callId`) before the next user or assistant message.
 */
/** A part of a message in the core's JSON form (`result.messages` keeps them in `parts`). */
export type PartJson =
  | { type: 'text'; text: string }
  | { type: 'image'; media_type: string; data: string }
  | { type: 'image_url'; url: string }
  | { type: 'file'; media_type: string; filename: string; data: string };

/** Text in an array of parts. */
export class Text {
  constructor(text: string);
  readonly text: string;
}

/**
 * An image: its bytes (PNG, JPEG, GIF or WebP; `mediaType` omitted reads the type from them), or a URL
 * the provider fetches. A run's input (`agent.run([new Text('...'), Image.fromPath(p)])`) or a tool's
 * result (a tool returns an `Image`, or an array of parts).
 */
export class Image {
  constructor(options: { data?: Uint8Array; mediaType?: string; url?: string });
  static fromBytes(data: Uint8Array, mediaType?: string): Image;
  static fromPath(path: string, mediaType?: string): Image;
  static fromUrl(url: string): Image;
  readonly data: Uint8Array | null;
  readonly mediaType: string | null;
  readonly url: string | null;
}

/** A document: a PDF (`application/pdf`) or text (`text/plain`), with its filename. */
export class File {
  constructor(data: Uint8Array, mediaType: string, filename?: string);
  static fromBytes(data: Uint8Array, mediaType: string, filename?: string): File;
  static fromPath(path: string, mediaType: string): File;
  readonly data: Uint8Array;
  readonly mediaType: string;
  readonly filename: string;
}

/** One piece of a run's input: text (a string or `Text`), an `Image` or a `File`. */
export type Part = Text | Image | File | string;

export type Message =
  | { role: 'user'; content: string; parts?: PartJson[] }
  | {
      role: 'assistant';
      content: string | null;
      /** `arguments` is the raw JSON text the model wrote. */
      toolCalls: { id: string; name: string; arguments: string; fromText?: boolean }[];
    }
  | { role: 'tool'; callId: string; name: string; content: string; isError: boolean; parts?: PartJson[] }
  /** Items the provider answered itself (its own tool search), kept verbatim for its wire. */
  | { role: 'provider'; wire: string; items: JsonValue[] };

/** What a finished run returns. */
export interface RunResult {
  /** The model's final text answer. */
  output: string;
  /** Every tool call made, in the order the model asked for them. */
  toolCalls: ToolCallRecord[];
  usage: Usage;
  /** Model requests made. */
  turns: number;
  /** Why the model stopped its final answer (`length`: the output token limit cut it). */
  stopReason: StopReason;
  /** What the run cost, when the price table has the model. */
  cost: number | undefined;
  /** Checklist items still pending or in_progress when the run ended (past the nudge cap). */
  openItems: ChecklistItem[];
  /** The final answer as the agent's `outputType` (its `parse` applied), when it has one. */
  structuredOutput?: unknown;
  /** The whole conversation, the input first. */
  messages: Message[];
}

/** How one run may be cancelled, and the host value its tools get. */
export interface RunOptions<Ctx = unknown> {
  /** Aborting it cancels the run, its HTTP request and its tools. */
  signal?: AbortSignal;
  /**
   * A value of yours every tool of the run reads as `ctx.context` (a database pool, the current user).
   * It stays in JavaScript: never sent to the model, never stored.
   */
  context?: Ctx;
}

/** An agent: a model, instructions and tools. Throws a ConfigError (or TypeError) on bad options. */
export declare class Agent<Ctx = unknown> {
  constructor(options: AgentOptions<Ctx>);
  /**
   * Runs the agent from one user message to the final answer. Rejects with a ModelError,
   * MaxTurnsError or CancelledError (all AmbitError); aborting `options.signal` cancels the run, its
   * HTTP request and its tools (CancelledError). A result (or, with a signal, any of the run's events)
   * whose JSON text would pass V8's string limit (about 512 MiB) rejects with EventTooLargeError.
   */
  run(input: string | Message[] | Part[], options?: RunOptions<Ctx>): Promise<RunResult>;
  /**
   * Runs the agent, yielding its events as they happen; the last is `run_finished`. A failed run throws
   * its error after the events before it; leaving the loop early cancels the run, and so does aborting
   * `options.signal`, even while no event comes (the iteration throws a CancelledError).
   */
  stream(input: string | Message[] | Part[], options?: RunOptions<Ctx>): AsyncGenerator<AgentEvent, void, undefined>;
  /** Every tool (host tools, then built-ins) with its effective level and status. */
  listTools(): ToolListing[];
  /** Connects and lists the MCP servers now (a run does it before its first request); then `listTools()` shows their tools. */
  refreshTools(): Promise<void>;
  /**
   * The same agent under another policy, keeping its sub-agents (and its model, instructions, tools,
   * MCP servers and settings); this agent is unchanged. A sub-agent spawned before is re-admitted
   * against the new policy's reach when it is followed up: a level dropped to narrows it (its report
   * says `Permission: read`), a directory no longer held refuses the follow-up. Throws a ConfigError
   * for a bad policy.
   *
   * @example
   * const agent = new Agent({ model, policy: { level: 'workspace' }, subagents: true });
   * await agent.run('spawn a helper');
   * const narrowed = agent.withPolicy({ level: 'read' });
   * await narrowed.run('follow up with the helper'); // the helper now runs at read
   */
  withPolicy(policy: Policy): Agent;
}

// ---- The work ledger (ledger.js). Times are milliseconds since the Unix epoch. ----

export type GrantReason = 'fresh' | 'cooldown_expired' | 'fingerprint_changed';
export type SkipReason = 'in_flight' | 'cooling_down' | 'over_limit';
export type Outcome = 'productive' | 'empty' | 'failed' | 'released';
export type AttemptOutcome = Outcome | 'abandoned';
export type EntryState = 'in_flight' | 'cooling_down' | 'eligible';

/** A ledger call refused or failed; a refused batch wrote nothing. */
export declare class LedgerError extends AmbitError {}
/** An unknown outcome, a missing subject_key or the same subject twice (code "ledger_invalid_batch"). */
export declare class InvalidBatchError extends LedgerError {}
/** A record for a grant another run has since reclaimed (code "ledger_stale_token"). */
export declare class StaleTokenError extends LedgerError {
  subjectKey: string;
}
/** A record for a subject this run never claimed (code "ledger_not_claimed"). */
export declare class NotClaimedError extends LedgerError {
  subjectKey: string;
}
/** An argument the ledger cannot use: an empty key, a batch size below 1, an unknown limit, a bad URL (code "ledger_invalid_argument"). */
export declare class InvalidLedgerArgumentError extends LedgerError {}
/** A routine claiming outside the scope its first claim pinned (code "ledger_scope_pinned"). */
export declare class ScopePinnedError extends LedgerError {
  routineId: string;
  pinnedScope: string;
  scope: string;
}

export interface LabelledCandidate {
  subjectKey: string;
  status: 'granted' | 'skipped';
  grantReason?: GrantReason;
  /** The claim token of the grant (unguessable; fits a JS number) that fences the record. */
  token?: number;
  leaseUntil?: number;
  skipReason?: SkipReason;
  eligibleAt?: number | null;
}

export declare class ClaimResult {
  scope: string;
  candidates: LabelledCandidate[];
  readonly granted: LabelledCandidate[];
  get(subjectKey: string): LabelledCandidate | undefined;
}

export interface RecordInput {
  subjectKey: string;
  outcome: Outcome;
  token?: number;
  fingerprint?: string;
}

export interface RecordResult {
  scope: string;
  recorded: { subjectKey: string; outcome: Outcome; attempts: number; misses: number; eligibleAt: number | null; escalate: boolean }[];
  escalate: string[];
}

export interface LedgerEntry {
  scope: string;
  subjectKey: string;
  state: EntryState;
  eligibleAt: number | null;
  lastOutcome: AttemptOutcome | null;
  lastGrantReason: GrantReason | null;
  attempts: number;
  misses: number;
  claimToken: number;
  escalate: boolean;
  routineId: string | null;
  lastAttemptAt: number | null;
}

export interface RoutineLimits {
  parallelLimit?: number;
  dailyCap?: number | null;
  running?: number;
  startedToday?: number;
}

export declare class Ledger {
  /** Wraps a native ledger handle (as the test hooks open one); `Ledger.open` is the way to open one. */
  constructor(handle: unknown);
  static open(url: string, options?: { durability?: 'full' | 'fast' }): Promise<Ledger>;
  claim(
    scope: string,
    candidates: (string | { subjectKey: string; fingerprint?: string })[],
    options?: { limit?: number; leaseMs?: number; runId?: string | null; routineId?: string | null },
  ): Promise<ClaimResult>;
  record(scope: string, records: RecordInput[], options?: { runId?: string | null }): Promise<RecordResult>;
  list(options?: { scope?: string | null; state?: 'all' | 'eligible' | 'suppressed'; routineId?: string | null }): Promise<LedgerEntry[]>;
  grantReasonCounts(scope: string): Promise<{ fresh: number; cooldownExpired: number; fingerprintChanged: number }>;
  reportBacklog(
    routineId: string,
    subjectKeys: string[],
    batchSize: number,
    options?: { limits?: RoutineLimits; runId?: string | null },
  ): Promise<{ routineId: string; scope: string | null; workable: number; extraRuns: number }>;
  drainDecision(
    routineId: string,
    runId: string,
    options?: { limits?: RoutineLimits },
  ): Promise<{ stop: 'nothing_workable' | 'queue_empty' | 'run_did_not_report' | 'report_stale' | null; startRuns: number }>;
  /**
   * The four agent tools (`claim_work`, `record_work`, `list_work_ledger`, `report_backlog`) bound to one
   * run of a routine, for `new Agent({ledger})`; the SDK fills in scope, routine id, run id and tokens.
   */
  forRoutine(
    scope: string,
    options: { runId: string; routineId?: string | null; limit?: number; leaseMs?: number; limits?: RoutineLimits },
  ): RoutineLedger;
}

/** The ledger's four agent tools bound to one run of a routine (`ledger.forRoutine(...)`). */
export declare class RoutineLedger {
  private constructor();
  readonly scope: string;
  readonly routineId: string | null;
  readonly runId: string;
  readonly toolNames: string[];
}

/**
 * What a tool call sees of the background task it runs in (the second argument of `run`).
 * `progress(note)` reports a short note (also the task's heartbeat); `cancelled` turns true when the
 * task is asked to stop, so a long tool checks it at its checkpoints and unwinds.
 */
export declare class TaskContext<Ctx = unknown> {
  private constructor(token: number);
  /**
   * The run's context: the value given to `agent.run(input, { context })`. It stays in JavaScript: never
   * sent to the model, never stored. A run given none throws a ConfigError.
   */
  readonly context: Ctx;
  /** False when the call does not run in the background: progress goes nowhere, never cancelled. */
  readonly inBackground: boolean;
  progress(note: string): void;
  readonly cancelled: boolean;
  /** The value of a credential the tool declared; an undeclared alias throws a ConfigError. */
  credential(alias: string): string;
}

/** The context a tool call gets (the second argument of `run`): the same class as TaskContext. */
export declare const ToolContext: typeof TaskContext;
export type ToolContext<Ctx = unknown> = TaskContext<Ctx>;

/**
 * Credentials by alias (SPEC §15), for `new Agent({credentials})`: delivered to the tools that declare
 * them, to the shell's environment and to web_fetch's hosts; every tool result passes the redactor.
 */
export declare class Credentials {
  constructor();
  /** A credential with a fixed value (at least 8 bytes). */
  value(alias: string, value: string): this;
  /** A credential read from the environment variable `name` each time it is needed. */
  env(alias: string, name: string): this;
  /** A credential the host produces on demand, plain or async. */
  callback(alias: string, fn: (alias: string) => string | Promise<string>): this;
  /** `shell_execute` runs with the environment variable `name` set to the credential `alias`. */
  shellEnv(name: string, alias: string): this;
  /** `web_fetch` adds `header: <prefix><value>` for requests to `host` (default `Authorization: Bearer`). */
  webFetch(host: string, alias: string, options?: { header?: string; prefix?: string }): this;
}

// ---- Sessions (sessions.js): an append-only conversation log; parked approvals. ----

/** The session tools, by built-in name: `new Agent({ builtins: SESSION_TOOLS })`. */
export declare const SESSION_TOOLS: readonly [
  'conversation_search',
  'conversation_read',
  'session_list',
  'session_search',
  'context_check',
  'context_compact',
];

/** What a parked run waits on. */
export interface PendingApproval {
  callId: string;
  tool: string;
  arguments: unknown;
  toolLevel: Level;
  sessionLevel: Level;
  reason: 'above_level' | 'requires_approval';
}

/** An answer given to a parked run. (An approval handler may also answer `{ decision: 'later' }`.) */
export type ResumeDecision =
  | { decision: 'approve' }
  | { decision: 'deny'; reason: string }
  | { decision: 'revise'; arguments: Record<string, unknown> };

/** A session run parked on an approval (code "awaiting_approval"). A signal, not a failure. */
export declare class AwaitingApprovalError extends AmbitError {
  readonly sessionId: string;
  readonly request: PendingApproval;
}

/** One entry of a session's log: `#index`, and a message, a compaction boundary or a summary. */
export type SessionEntry =
  | { index: number; kind: 'message'; message: Record<string, unknown> }
  | { index: number; kind: 'boundary'; keep_from: number }
  | { index: number; kind: 'summary'; text: string };

/** An open session store: SQLite (`sqlite:///path`) or PostgreSQL (`postgres://…`). */
export declare class Sessions {
  /** Wraps a native store handle (as the test hooks open one); `Sessions.open` is the way to open one. */
  constructor(handle: unknown);
  /**
   * Opens the store. Auto-compaction fires at `compactAt` of the context window: the model's unless
   * `contextWindow` names one for this store. `leaseMs`: how long a run holds the session unless its
   * heartbeat renews it (default 30000). `busyWaitMs`: how long a run on a busy session waits for it
   * before it is refused with `session_busy` (default: refused at once; at most one hour).
   */
  static open(
    url: string,
    options?: { contextWindow?: number; compactAt?: number; keepRecent?: number; leaseMs?: number; busyWaitMs?: number },
  ): Promise<Sessions>;
  create(): Promise<string>;
  /**
   * Runs the agent in the session, continuing its conversation; a parked run rejects with
   * AwaitingApprovalError. One run at a time per session, across processes: while another run holds the
   * session this rejects with an AmbitError of code `session_busy`. The session is the history: `input`
   * is the next user message, a string or an array of parts (`[new Text('What is this?'),
   * Image.fromBytes(png)]`), stored in the session so later turns (and a resume in another process) send
   * the image again; a refused part rejects with InvalidMessageError naming it, and nothing is stored.
   * An array of messages is refused (ConfigError) and nothing is stored (run the agent without a session
   * to keep a history yourself).
   */
  run(agent: Agent<any>, sessionId: string, input: string | Part[], options?: { context?: unknown }): Promise<RunResult>;
  /**
   * Answers the approval a parked session waits on, from any process or language, and continues the run.
   * Exactly once: a resume of a session no longer waiting (another resume claimed it first, or it was
   * never parked) rejects with an AmbitError of code `session_not_parked`.
   */
  resume(agent: Agent, sessionId: string, decision: ResumeDecision, options?: { context?: unknown }): Promise<RunResult>;
  pending(sessionId: string): Promise<PendingApproval | null>;
  compact(agent: Agent, sessionId: string): Promise<boolean>;
  search(sessionId: string, query: string, options?: { isRegex?: boolean; limit?: number }): Promise<string>;
  read(sessionId: string, start: number, limit?: number): Promise<string>;
  entries(sessionId: string): Promise<SessionEntry[]>;
  /**
   * The background-task results that land in this store's sessions from now on (a run in a session ends
   * without waiting for its background tasks; each result lands in the session as its own turn).
   */
  deliveries(): AsyncIterableIterator<Delivery>;
  /** A session's background task from any process; `lost` when its process died. */
  taskResult(sessionId: string, taskId: string): Promise<TaskSnapshot>;
}

/** A background task's result that landed in a session after the run that started it ended. */
export interface Delivery {
  sessionId: string;
  taskId: string;
  /** The tool the task ran. */
  name: string;
  status: 'finished' | 'failed' | 'cancelled';
  result: string;
}

/** A session's background task as the store has it. */
export interface TaskSnapshot {
  sessionId: string;
  taskId: string;
  name: string;
  status: 'running' | 'finished' | 'failed' | 'cancelled' | 'lost';
  /** The latest progress note. */
  note: string | null;
  /** The result text, once it landed. */
  result: string | null;
}

// ---- Memory (memory.js). Times are milliseconds since the Unix epoch. ----

export type MemoryKind = 'fact' | 'preference' | 'lesson' | 'instruction';

/** One stored memory. `salience` runs from 1 (trivia) to 10 (essential). */
export interface MemoryRecord {
  id: number;
  agent: string;
  key: string | null;
  subject: string | null;
  kind: MemoryKind;
  title: string;
  body: string;
  tags: string[];
  salience: number;
  pinned: boolean;
  source: string | null;
  createdAt: number;
  updatedAt: number;
}

/** A memory to save; with a `key` already saved, the fields given update it in place. */
export interface RememberOptions {
  body?: string;
  title?: string;
  kind?: MemoryKind;
  tags?: string[] | string;
  salience?: number;
  pinned?: boolean;
  key?: string;
  subject?: string;
}

/** A recall: with `query`, by relevance; without, pinned then highest salience. */
export interface RecallOptions {
  query?: string;
  /** Memories carrying all of these tags. */
  tags?: string[] | string;
  kind?: MemoryKind;
  /** Memories about one of these callers. */
  subjects?: string[] | string;
  /** 1 to 50 (default 10). */
  limit?: number;
}

/** A memory call refused or failed (code "memory_store" unless a subclass says otherwise). */
export declare class MemoryError extends AmbitError {}
/** An argument out of bounds or malformed (code "memory_invalid_argument"); `field` names it. */
export declare class InvalidMemoryArgumentError extends MemoryError {
  field: string;
}
/** No memory with that id or key for this agent (code "memory_not_found"). */
export declare class MemoryNotFoundError extends MemoryError {}
/** A write through read-only access, a sub-agent's grant (code "memory_read_only"). */
export declare class MemoryReadOnlyError extends MemoryError {}

/** A memory store on SQLite or PostgreSQL, one namespace per agent name. */
export declare class Memory {
  /** Opens `sqlite:///path` or `postgres://…`, applying migrations. */
  static open(url: string): Promise<Memory>;
  readonly url: string;
  remember(agent: string, memory: RememberOptions): Promise<{ memory: MemoryRecord; created: boolean }>;
  recall(agent: string, options?: RecallOptions): Promise<MemoryRecord[]>;
  forget(agent: string, target: { id?: number; key?: string }): Promise<boolean>;
  list(agent: string): Promise<MemoryRecord[]>;
  /** `{"version": 1, "memories": [...]}` as JSON text. */
  export(agent?: string): Promise<string>;
}

/** A knowledge call refused or failed (code "knowledge_io" unless a subclass says otherwise). */
export class KnowledgeError extends AmbitError {
  field?: string;
}
/** An argument out of bounds or malformed (code "knowledge_invalid_argument"); `field` names it. */
export class InvalidKnowledgeArgumentError extends KnowledgeError {}
/** A document of that name exists and `overwrite` was off (code "knowledge_exists"). */
export class KnowledgeExistsError extends KnowledgeError {}

/** What `Knowledge.publish` wrote. */
export interface PublishedDocument {
  /** The document's name (`.md` added when it had no extension). */
  name: string;
  path: string;
  bytes: number;
  /** Whether an existing document was replaced. */
  replaced: boolean;
}

/**
 * A knowledge directory: the agent lists its documents and reads them (text inline up to a cap, a
 * larger or binary document as a path under its scope); the host publishes text documents into it.
 */
export class Knowledge {
  /** `dir`: absolute, or relative to the policy's working directory (for `publish`, to the process's). */
  constructor(dir: string, options?: { inlineMaxBytes?: number });
  readonly dir: string;
  readonly inlineMaxBytes?: number;
  /** Publishes a text document (at most 200 KB); an existing one is replaced only with `overwrite`. */
  publish(name: string, content: string, options?: { overwrite?: boolean }): PublishedDocument;
}

// ---- Routines (routines.js): standing work on a schedule, run by runners over one store. ----

/** A routine call refused or failed. */
export declare class RoutineError extends AmbitError {}
/** A field of a definition, an update or an option is wrong (code "invalid_argument"); `field` names it in camelCase. */
export declare class InvalidRoutineError extends RoutineError {
  readonly field: string | undefined;
}
/** No routine with that id (code "routine_not_found"). */
export declare class RoutineNotFoundError extends RoutineError {}
/** The store failed: unreachable, I/O, a migration that does not apply (code "routine_store"). */
export declare class RoutineStoreError extends RoutineError {}

/** When a routine may start a run: weekdays (`mon` … `sun`), `HH:MM` start and end, an IANA time zone. */
export interface ActiveWindow {
  weekdays: string[];
  start: string;
  end: string;
  timezone: string;
}

/** A routine's definition: an interval or a cron expression (with its time zone). */
export interface RoutineDefinition {
  id?: string;
  agent: string;
  instructions: string;
  title?: string | null;
  intervalSeconds?: number | null;
  cronExpression?: string | null;
  timezone?: string | null;
  activeWindow?: ActiveWindow | null;
  enabled?: boolean;
  parallelLimit?: number | null;
  catchUp?: number;
  dailyCap?: number | null;
  model?: string | null;
}

/** An update: only the fields given change; `null` clears the title, a limit, the model or the window. */
export type RoutineChanges = Partial<Omit<RoutineDefinition, 'id'>>;

/** One definition change, credited to the actor the host named. */
export interface Revision {
  revision: number;
  actor: string;
  at: number;
  change: 'create' | 'update' | 'delete';
  definition: RoutineDefinition;
}

/** A stored routine: its definition, its revision, its next slot (null while paused). */
export interface Routine extends RoutineDefinition {
  id: string;
  enabled: boolean;
  catchUp: number;
  revision: number;
  createdAt: number;
  updatedAt: number;
  nextSlot: number | null;
}

/** A routine with its revision history, oldest first. */
export interface RoutineWithHistory extends Routine {
  revisions: Revision[];
}

export type RunState = 'running' | 'parked' | 'finished' | 'lost';
export type OutcomeStatus = 'success' | 'nothing_to_do' | 'failure' | 'error' | 'unknown';

/** One run of a routine. */
export interface RunRecord {
  id: string;
  routineId: string;
  revision: number;
  kind: 'scheduled' | 'drain';
  slotAt: number | null;
  state: RunState;
  runner: string;
  sessionId: string;
  startedAt: number;
  endedAt: number | null;
  outcome: OutcomeStatus | null;
  summary: string | null;
  toolCalls: number | null;
  toolErrors: number | null;
  inputTokens: number;
  outputTokens: number;
  cost: number | null;
}

/** Slots that were not run. */
export interface SkippedSlots {
  routineId: string;
  firstSlot: number;
  lastSlot: number;
  slots: number;
  reason: 'missed' | 'daily_cap' | 'window' | 'disabled';
  at: number;
}

/** What one tick did. */
export interface TickReport {
  started: RunRecord[];
  lost: RunRecord[];
  skipped: SkippedSlots[];
  /** Parked runs whose session a resume ended since: now finished. */
  resumed: RunRecord[];
}

/** The routine store on SQLite (`sqlite:///path`) or PostgreSQL (`postgres://…`). */
export declare class Routines {
  static open(url: string): Promise<Routines>;
  create(definition: RoutineDefinition, options: { actor: string }): Promise<Routine>;
  get(id: string): Promise<RoutineWithHistory>;
  revisions(id: string): Promise<Revision[]>;
  list(options?: { agent?: string | null }): Promise<Routine[]>;
  update(id: string, changes: RoutineChanges, options: { actor: string }): Promise<Routine>;
  delete(id: string, options: { actor: string }): Promise<void>;
  runs(options?: { routineId?: string | null; limit?: number }): Promise<RunRecord[]>;
  run(runId: string): Promise<RunRecord | null>;
  skipped(options?: { routineId?: string | null }): Promise<SkippedSlots[]>;
}

/** The run's own tools, for `new Agent({ routine: ctx })`. */
export declare class RoutineRunTools {
  readonly toolNames: string[];
}

/** What an agent factory knows of the run. */
export declare class RunContext {
  readonly routine: Routine;
  readonly run: RunRecord;
  readonly tools: RoutineRunTools;
}

export interface RunnerOptions {
  /** Maps the routines' agent names to factories. */
  agents: Record<string, (ctx: RunContext) => Agent | Promise<Agent>>;
  /** How long a run of a runner that died stays held before it is marked lost (default 60000). */
  leaseMs?: number;
  /** How often `runForever` ticks (default 1000). */
  pollMs?: number;
  id?: string;
  /** The work ledger: every run gets its tools, and a backlog report starts a drain. */
  ledger?: Ledger;
}

/** Fires the due slots of the routines in a store as session runs; any number may share one store. */
export declare class Runner {
  constructor(routines: Routines, sessions: Sessions, options: RunnerOptions);
  readonly id: string;
  tick(now?: number): Promise<TickReport>;
  waitIdle(): Promise<void>;
  runForever(options?: { signal?: AbortSignal }): Promise<void>;
  stop(): void;
}

/** Options of `telemetry.enable`. */
export interface TelemetryOptions {
  /** The collector's OTLP/HTTP endpoint: a base URL (`http://localhost:4318`, `/v1/traces` added) or the traces URL. */
  endpoint: string;
  /** Headers sent with every export (a hosted collector's API key). */
  headers?: Record<string, string>;
  /** Record message contents (after the credential redactor). Default false. */
  recordContent?: boolean;
  /** The exported resource's `service.name`. Default "ambit". */
  serviceName?: string;
}

/**
 * OTLP export of the core's spans (OpenTelemetry GenAI conventions: `invoke_agent` > `turn` >
 * `chat {model}` + `execute_tool {name}`). Off by default. Errors are `ConfigError`.
 */
export declare const telemetry: {
  /** Turns export on; again after `disable()`, on again (one endpoint per process). */
  enable(options: TelemetryOptions): void;
  /** Exports every finished span not yet sent. */
  flush(): void;
  /** Exports what is pending and turns export off. */
  disable(): void;
  /**
   * The logging bridge: calls `logger` with every record of the core at `level` or above (default
   * `info`), on the JS thread, in order; `null` stops it. Unknown options or levels: `ConfigError`.
   */
  setLogger(logger: ((record: LogRecord) => void) | null, options?: { level?: LogLevel }): void;
  /**
   * Resolves once every record handed to the logger before the call has reached it (the logger does not
   * keep the process alive: await this before a program ends to be sure its last records were logged).
   */
  flushLogger(): Promise<void>;
};

/** A log level of the core, most severe first. */
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** One record of the core's log (`telemetry.setLogger`). */
export interface LogRecord {
  readonly level: LogLevel;
  /** The core's module: `ambit::agent`, `ambit::tools`, `ambit::mcp::client`, ... */
  readonly target: string;
  /** The message, then its fields as `name=value`. */
  readonly message: string;
}
