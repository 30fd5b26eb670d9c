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
  constructor(message: string, options?: ErrorOptions);
}

/** The run was cancelled. */
export declare class CancelledError extends AmbitError {
  readonly code: 'cancelled';
  constructor(message: string, options?: ErrorOptions);
}

export interface OpenAIChatOptions {
  /** Defaults to `OPENAI_BASE_URL`, else `https://api.openai.com/v1`. */
  baseUrl?: string;
  /** Defaults to `OPENAI_API_KEY`, else no key. */
  apiKey?: string;
}

/** A model on the OpenAI Chat Completions wire (any OpenAI-compatible server by `baseUrl`). */
export declare class OpenAIChat {
  readonly model: string;
  readonly baseUrl: string | undefined;
  readonly apiKey: string | undefined;
  constructor(model: string, options?: OpenAIChatOptions);
}

export interface ToolDefinition<Args extends Record<string, any> = Record<string, any>> {
  /** The name the model calls the tool by; unique within an agent. */
  name: string;
  /** What the tool does, for the model. */
  description?: string;
  /** JSON Schema of the arguments; must be an object schema (checked when the agent is built). */
  parameters: JsonSchema;
  /**
   * Runs the tool on the arguments the model sent; sync or async. A string result reaches the model
   * as it is, anything else as JSON. A thrown error becomes an error result the model sees
   * (`Error: tool '<name>' failed: <message>`); the run goes on.
   */
  run: (args: Args) => unknown | Promise<unknown>;
}

/** A tool made by {@link tool}. */
export interface Tool<Args extends Record<string, any> = Record<string, any>> {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchema;
  readonly run: (args: Args) => unknown | Promise<unknown>;
}

/** Declares a host tool. Throws a TypeError when `name` or `run` is missing or of the wrong type. */
export declare function tool<Args extends Record<string, any> = Record<string, any>>(
  definition: ToolDefinition<Args>,
): Tool<Args>;

export interface AgentOptions {
  model: OpenAIChat;
  /** The system instructions sent with every request. */
  instructions?: string;
  tools?: Tool<any>[];
  /** The most model requests one run may make (default 10, at least 1). */
  maxTurns?: number;
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

/** One entry of the conversation. */
export type Message =
  | { role: 'user'; content: string }
  | {
      role: 'assistant';
      content: string | null;
      /** `arguments` is the raw JSON text the model wrote. */
      toolCalls: { id: string; name: string; arguments: string }[];
    }
  | { role: 'tool'; callId: string; name: string; content: string; isError: boolean };

/** What a finished run returns. */
export interface RunResult {
  /** The model's final text answer. */
  output: string;
  /** Every tool call made, in the order the model asked for them. */
  toolCalls: ToolCallRecord[];
  usage: Usage;
  /** Model requests made. */
  turns: number;
  /** The whole conversation, the input first. */
  messages: Message[];
}

/** An agent: a model, instructions and tools. Throws a ConfigError (or TypeError) on bad options. */
export declare class Agent {
  constructor(options: AgentOptions);
  /**
   * Runs the agent from one user message to the final answer. Rejects with a ModelError,
   * MaxTurnsError or CancelledError (all AmbitError).
   */
  run(input: string): Promise<RunResult>;
}
