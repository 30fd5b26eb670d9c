// The hand-written facade over the UniFFI-generated layer (ambit_swift.swift). It only translates:
// Swift tools into `HostTool`, configuration into `AgentConfig`, `CoreError` into `AmbitError`.
// Every rule (tool names, schemas, the loop, error texts) lives in the Rust core.

import Foundation

/// A tool the agent can call: a type with a name, a description, a JSON Schema and an async `call`.
///
/// ```swift
/// struct GetWeather: AmbitTool {
///     let name = "get_weather"
///     let description = "Current weather for a city."
///     let parameters = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
///     func call(arguments: [String: Any]) async throws -> String { "sunny" }
/// }
/// ```
///
/// A thrown error becomes an error result the model sees ("Error: tool 'get_weather' failed: <message>");
/// the message is the error's `errorDescription` when it is a `LocalizedError`, else its description.
public protocol AmbitTool: Sendable {
    var name: String { get }
    var description: String { get }
    /// The JSON Schema of the arguments, as JSON text; must be an object schema.
    var parameters: String { get }
    /// Runs the tool on the JSON object the model sent. The returned text reaches the model. Implement
    /// this, or `call(arguments:context:)` when the tool reports progress or checks cancellation.
    func call(arguments: [String: Any]) async throws -> String
    /// Runs the tool with the background task it runs in (progress notes, the cancellation token).
    func call(arguments: [String: Any], context: TaskContext) async throws -> String
    /// The lowest level the tool may run at (default `.unrestricted`: undeclared; see Policy.swift).
    var level: Level { get }
    /// Every call goes to the approval handler, whatever the level (default false).
    var requiresApproval: Bool { get }
    /// String arguments whose blank value is itself the value (default none).
    var allowBlank: [String] { get }
    /// Running a call twice has the effect of running it once (default false): in a session, a call a
    /// crash interrupted is run again on resume; any other tool's is reported to the model as of unknown
    /// outcome, never re-run.
    var idempotent: Bool { get }
    /// The credential aliases the tool reads from its context (`context.credential("github")`), never
    /// from its arguments (default none).
    var credentials: [String] { get }
}

extension AmbitTool {
    public var credentials: [String] { [] }

    public func call(arguments: [String: Any]) async throws -> String {
        throw ToolError("tool '\(name)' implements neither call(arguments:) nor call(arguments:context:)")
    }

    public func call(arguments: [String: Any], context: TaskContext) async throws -> String {
        try await call(arguments: arguments)
    }
}

/// What a tool call sees of the background task it runs in. `progress(_:)` reports a short note (also
/// the task's heartbeat); `isCancelled` turns true when the task is asked to stop, so a long tool checks
/// it at its checkpoints and unwinds. A cancelled task also cancels the Swift `Task` the call runs in, so
/// `Task.checkCancellation()` and cancellable awaits (`Task.sleep`) throw `CancellationError` too.
/// Outside the background, `inBackground` is false and progress goes nowhere.
public struct TaskContext: Sendable {
    let token: UInt64
    /// The credentials the tool declared, produced for this call by the agent's `Credentials`.
    var credentialValues: [String: String] = [:]
    /// The id of the run's context (`RunContexts`; 0: the run has none).
    var contextID: UInt64 = 0

    /// The run's context: the value given to `agent.run(_:context:)` (or `run(messages:context:)`), nil
    /// for a run given none. It stays in Swift: never sent to the model, never stored. Read it as your
    /// type with `context as? YourType`.
    public var context: (any Sendable)? { RunContexts.shared.value(contextID) }

    /// The value of a credential the tool declared. An alias it did not declare throws
    /// `AmbitError.config`. The redactor shows the model `[credential:alias]` if it is returned.
    public func credential(_ alias: String) throws -> String {
        guard let value = credentialValues[alias] else {
            let declared = credentialValues.keys.sorted().joined(separator: ", ")
            throw AmbitError.config(message: "credential '\(alias)' was not declared by the tool (declared: \(declared))")
        }
        return value
    }

    public var inBackground: Bool { token != 0 }

    /// Reports a progress note. A note the core fails to take (a bug in ambit) is dropped: a note is
    /// advisory, and the call goes on.
    public func progress(_ note: String) {
        _ = try? taskProgress(token: token, note: note)
    }

    /// Whether the task was asked to stop. When the core fails to answer (a bug in ambit), the answer is
    /// true: the tool stops rather than run on unwatched.
    public var isCancelled: Bool { Task.isCancelled || ((try? taskCancelled(token: token)) ?? true) }
}

/// A tool whose arguments are a `Decodable` type: `parameters` is the type's JSON Schema (given, as an
/// `OutputSchema` is: Swift cannot derive one), by which the core checks every call, as it checks any
/// tool's; the checked arguments are then decoded as `Args` before `run` sees them. Arguments that pass
/// the schema but do not decode are the call's error result, naming the type; `run` never sees them.
public struct TypedTool<Args: Decodable>: AmbitTool {
    public let name: String
    public let description: String
    public let parameters: String
    public let level: Level
    public let requiresApproval: Bool
    public let allowBlank: [String]
    public let idempotent: Bool
    let run: @Sendable (Args, TaskContext) async throws -> String

    /// `parametersJSON`: `Args`' JSON Schema as JSON text (an object schema; checked when the agent is
    /// built).
    public init(name: String, description: String, parametersJSON: String, level: Level = .unrestricted,
                requiresApproval: Bool = false, allowBlank: [String] = [], idempotent: Bool = false,
                run: @escaping @Sendable (Args, TaskContext) async throws -> String) {
        self.name = name
        self.description = description
        self.parameters = parametersJSON
        self.level = level
        self.requiresApproval = requiresApproval
        self.allowBlank = allowBlank
        self.idempotent = idempotent
        self.run = run
    }

    /// `parameters`: `Args`' JSON Schema as a JSON object; throws `AmbitError.config` when it is not one.
    public init(name: String, description: String, parameters: [String: Any], level: Level = .unrestricted,
                requiresApproval: Bool = false, allowBlank: [String] = [], idempotent: Bool = false,
                run: @escaping @Sendable (Args, TaskContext) async throws -> String) throws {
        guard JSONSerialization.isValidJSONObject(parameters),
            let data = try? JSONSerialization.data(withJSONObject: parameters, options: [.sortedKeys])
        else {
            throw AmbitError.config(message: "invalid configuration: the parameters of tool '\(name)' are not JSON")
        }
        self.init(name: name, description: description, parametersJSON: String(decoding: data, as: UTF8.self),
                  level: level, requiresApproval: requiresApproval, allowBlank: allowBlank, idempotent: idempotent,
                  run: run)
    }

    public func call(arguments: [String: Any], context: TaskContext) async throws -> String {
        let args: Args
        do {
            let data = try JSONSerialization.data(withJSONObject: arguments)
            args = try JSONDecoder().decode(Args.self, from: data)
        } catch {
            throw ToolError("the arguments of tool '\(name)' do not decode as \(Args.self): \(error)")
        }
        return try await run(args, context)
    }
}

/// A simple error for tools to throw: the message reaches the model as it is.
public struct ToolError: LocalizedError, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var errorDescription: String? { message }
    public var description: String { message }
}

/// Which model to talk to, on which wire, where, and how.
public struct Model: Sendable, Equatable {
    public var wire: Wire
    public var name: String
    public var baseURL: String?
    public var apiKey: String?
    /// Stream answers (SSE); text reaches `stream(_:)` events as it is written.
    public var stream: Bool
    /// The limit on one HTTP request in seconds, retries not included (default 600).
    public var timeout: Double?
    /// Attempts after the first on 408, 409, 429, 5xx and connection errors, except errors the same
    /// request gets again (default 2).
    public var maxRetries: Int?
    /// Anthropic only: the most tokens one answer may have (default 4096).
    public var maxTokens: Int?
    /// A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the
    /// others), for an endpoint that holds names shorter: longer names reach it cut to fit. Above the
    /// wire's limit, `AmbitError.config` naming `max_tool_name_bytes`.
    public var maxToolNameBytes: Int?
    /// The tokens the model's context window holds (default: the model family's, or 32,768 for a model
    /// the core does not know); a session's auto-compaction fires at a share of it.
    public var contextWindow: Int?

    // The model settings every request carries (absent ones are the server's). A value out of range, or
    // a setting the wire lacks, is `AmbitError.config` naming it (the core's snake_case name) and the wire.
    /// The most tokens one answer may have (at least 1); on Anthropic the same number as `maxTokens`.
    public var maxOutputTokens: Int?
    /// Sampling temperature, 0 to 2. Not on Anthropic (its API has none).
    public var temperature: Double?
    /// Nucleus sampling, 0 to 1. Not on Anthropic.
    public var topP: Double?
    /// Texts that end the answer when written: 1 to 4, none empty. Not on Responses.
    public var stop: [String]?
    /// A seed for repeatable sampling. Chat Completions only.
    public var seed: Int?
    /// Which tool use the model is asked for (sent only with a request that offers tools).
    public var toolChoice: ToolChoice?
    /// Whether the model may ask for several tool calls in one answer.
    public var parallelToolCalls: Bool?
    /// Chat Completions only: `.auto` reads a tool call a model wrote as text (bare or fenced JSON,
    /// `<tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`; only tools offered in that request; never when the
    /// server sent calls) as a call, marked `fromText` in its `toolCallRequested` event; `.constrained` also
    /// asks the server (llama.cpp) to constrain the answer to one such call or a JSON string.
    public var textToolCalls: TextToolCalls?
    /// How hard a reasoning model thinks: "none", "minimal", "low", "medium", "high", "xhigh", "max"
    /// (Anthropic "low" to "max").
    public var reasoningEffort: String?
    /// Anthropic only: extended thinking with this many tokens (at least 1,024, below the answer's max tokens).
    public var thinkingBudget: Int?
    /// Anthropic only: prompt caching of the stable prefix (`cache_control` on the tools and the system
    /// prompt), on unless `false`; cache writes and reads are counted in the usage and cost.
    public var promptCaching: Bool?
    /// OpenAI wires: strict schemas, on unless `false`. A function tool, or a typed answer's JSON Schema, in
    /// strict mode's subset (every property required, `additionalProperties: false` on every object, no
    /// `default`, …) is sent with `strict: true`; any other without it. Not on Anthropic.
    public var strict: Bool?
    /// Responses only: whether the server keeps the response (`store`). `false` is stateless use: the
    /// requests also ask for the reasoning items' encrypted content, sent back on the next request.
    public var store: Bool?
    /// Headers every request carries, replacing the wire's own of those names (Azure OpenAI's `api-key`,
    /// `OpenAI-Organization`, `OpenAI-Project`); a bad or reserved name is `AmbitError.config` naming it.
    public var headers: [String: String]?
    /// Query parameters every request's URL carries (Azure OpenAI's `api-version`).
    public var query: [String: String]?
    /// A test model's script or function (`Model.testModel`, `Model.functionModel`; TestModel.swift).
    var test: TestBacking? = nil

    public init(wire: Wire, name: String, baseURL: String? = nil, apiKey: String? = nil, stream: Bool = false,
                timeout: Double? = nil, maxRetries: Int? = nil, maxTokens: Int? = nil, maxToolNameBytes: Int? = nil,
                contextWindow: Int? = nil, maxOutputTokens: Int? = nil, temperature: Double? = nil, topP: Double? = nil, stop: [String]? = nil,
                seed: Int? = nil, toolChoice: ToolChoice? = nil, parallelToolCalls: Bool? = nil,
                textToolCalls: TextToolCalls? = nil, reasoningEffort: String? = nil, thinkingBudget: Int? = nil,
                promptCaching: Bool? = nil, strict: Bool? = nil, store: Bool? = nil,
                headers: [String: String]? = nil, query: [String: String]? = nil) {
        self.wire = wire
        self.name = name
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.stream = stream
        self.timeout = timeout
        self.maxRetries = maxRetries
        self.maxTokens = maxTokens
        self.maxToolNameBytes = maxToolNameBytes
        self.contextWindow = contextWindow
        self.maxOutputTokens = maxOutputTokens
        self.temperature = temperature
        self.topP = topP
        self.stop = stop
        self.seed = seed
        self.toolChoice = toolChoice
        self.parallelToolCalls = parallelToolCalls
        self.textToolCalls = textToolCalls
        self.reasoningEffort = reasoningEffort
        self.thinkingBudget = thinkingBudget
        self.promptCaching = promptCaching
        self.strict = strict
        self.store = store
        self.headers = headers
        self.query = query
    }

    /// A model on the OpenAI Chat Completions wire (any OpenAI-compatible server works by base URL).
    /// Without a base URL or key, `OPENAI_BASE_URL` and `OPENAI_API_KEY` are used, else OpenAI's URL.
    public static func openAIChat(_ name: String, baseURL: String? = nil, apiKey: String? = nil,
                                  stream: Bool = false, maxToolNameBytes: Int? = nil) -> Model {
        Model(wire: .openAiChat, name: name, baseURL: baseURL, apiKey: apiKey, stream: stream,
              maxToolNameBytes: maxToolNameBytes)
    }

    public static func openAIChat(_ name: String, baseURL: URL, apiKey: String? = nil, stream: Bool = false,
                                  maxToolNameBytes: Int? = nil) -> Model {
        Model(wire: .openAiChat, name: name, baseURL: baseURL.absoluteString, apiKey: apiKey, stream: stream,
              maxToolNameBytes: maxToolNameBytes)
    }

    /// A model on the OpenAI Responses wire (`OPENAI_BASE_URL` and `OPENAI_API_KEY` by default).
    public static func openAIResponses(_ name: String, baseURL: String? = nil, apiKey: String? = nil,
                                       stream: Bool = false, maxToolNameBytes: Int? = nil) -> Model {
        Model(wire: .openAiResponses, name: name, baseURL: baseURL, apiKey: apiKey, stream: stream,
              maxToolNameBytes: maxToolNameBytes)
    }

    /// A model on the Anthropic Messages wire; the base URL ends in `/v1` (`ANTHROPIC_BASE_URL` + `/v1`
    /// and `ANTHROPIC_API_KEY` by default).
    public static func anthropic(_ name: String, baseURL: String? = nil, apiKey: String? = nil,
                                 stream: Bool = false, maxTokens: Int? = nil, maxToolNameBytes: Int? = nil) -> Model {
        Model(wire: .anthropic, name: name, baseURL: baseURL, apiKey: apiKey, stream: stream, maxTokens: maxTokens,
              maxToolNameBytes: maxToolNameBytes)
    }

    var settings: ModelSettings {
        ModelSettings(
            wire: wire, model: name, baseUrl: baseURL, apiKey: apiKey, stream: stream, timeoutSecs: timeout,
            maxRetries: maxRetries.map { Int64($0) }, maxTokens: maxTokens.map { Int64($0) },
            maxToolNameBytes: maxToolNameBytes.map { Int64($0) }, contextWindow: contextWindow.map { Int64($0) },
            maxOutputTokens: maxOutputTokens.map { Int64($0) },
            temperature: temperature, topP: topP, stop: stop, seed: seed.map { Int64($0) }, toolChoice: toolChoice,
            parallelToolCalls: parallelToolCalls, textToolCalls: textToolCalls, reasoningEffort: reasoningEffort,
            thinkingBudget: thinkingBudget.map { Int64($0) }, promptCaching: promptCaching, strict: strict, store: store,
            headers: headers, query: query)
    }
}

/// Every failure of configuring or running an agent. `code` is the same in every language.
public enum AmbitError: Error, Equatable, LocalizedError, CustomStringConvertible {
    /// The agent or a tool was configured wrongly (duplicate tool names, a schema that is not an object, …).
    case config(message: String)
    /// The provider answered with an error status.
    case modelHTTP(status: Int, message: String)
    /// The provider could not be reached.
    case modelTransport(message: String)
    /// The provider's answer could not be read.
    case modelResponse(message: String)
    /// The run used its turn budget without a final answer.
    case maxTurns(limit: Int, usage: Usage, message: String)
    /// The run went past a hard budget (`budget` is "tokens" or "cost"); `usage` is what it used.
    case budgetExceeded(budget: String, limit: Double, spent: Double, cost: Double?, usage: Usage, message: String)
    /// The output token limit cut the model's answer in the middle of calls of `tools`; none of them ran.
    case outputTruncated(tools: [String], usage: Usage, message: String)
    /// The final answer did not match the agent's output type after the wrong answers went back to the
    /// model `retries` times; `attempt` is the last answer's text.
    case outputInvalid(attempt: String, retries: Int, usage: Usage, message: String)
    /// A message history given as a run's input breaks a rule: `index` is the message's place in the
    /// list, `field` the field that is wrong (`role`, `call_id`, `tool_calls[0].id`). Nothing was sent.
    case invalidMessage(index: Int, field: String, message: String)
    /// A hook or guardrail threw (or answered what its point does not take): `hook` is its name, `point`
    /// where it ran (`before_tool_call`, …, `input_guardrail`, `output_guardrail`).
    case hookFailed(hook: String, point: String, message: String)
    /// A guardrail tripped: its name, `kind` ("input" or "output") and its verdict's JSON text.
    case guardrailTripped(guardrail: String, kind: String, verdictJSON: String, message: String)
    /// The run was cancelled.
    case cancelled(message: String)
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down.
    case `internal`(message: String)

    /// `config`, `model_http`, `model_transport`, `model_response`, `max_turns`, `budget_exceeded`,
    /// `output_truncated`, `output_invalid`, `invalid_message`, `hook_failed`, `guardrail_tripped`,
    /// `cancelled` or `internal`.
    public var code: String {
        switch self {
        case .config: return "config"
        case .modelHTTP: return "model_http"
        case .modelTransport: return "model_transport"
        case .modelResponse: return "model_response"
        case .maxTurns: return "max_turns"
        case .budgetExceeded: return "budget_exceeded"
        case .outputTruncated: return "output_truncated"
        case .outputInvalid: return "output_invalid"
        case .invalidMessage: return "invalid_message"
        case .hookFailed: return "hook_failed"
        case .guardrailTripped: return "guardrail_tripped"
        case .cancelled: return "cancelled"
        case .internal: return "internal"
        }
    }

    /// The core's text for the error.
    public var message: String {
        switch self {
        case let .config(message), let .modelHTTP(_, message), let .modelTransport(message),
             let .modelResponse(message), let .maxTurns(_, _, message), let .cancelled(message),
             let .internal(message), let .budgetExceeded(_, _, _, _, _, message),
             let .outputTruncated(_, _, message), let .outputInvalid(_, _, _, message),
             let .invalidMessage(_, _, message), let .hookFailed(_, _, message),
             let .guardrailTripped(_, _, _, message):
            return message
        }
    }

    public var errorDescription: String? { message }
    public var description: String { message }

    /// The facade's error for whatever a call into the core threw: `CoreError` by its case, an
    /// `AmbitError` as it is, and anything else the generated layer throws (a bug in ambit) as `.internal`.
    init(_ error: any Error) {
        switch error {
        case let e as AmbitError: self = e
        case let e as CoreError: self.init(e)
        default: self = .internal(message: "an unexpected error from ambit's generated layer: \(error)")
        }
    }

    init(_ error: CoreError) {
        switch error {
        case let .Config(message): self = .config(message: message)
        case let .ModelHttp(status, message): self = .modelHTTP(status: Int(status), message: message)
        case let .ModelTransport(message): self = .modelTransport(message: message)
        case let .ModelResponse(message): self = .modelResponse(message: message)
        case let .MaxTurns(maxTurns, usage, message):
            self = .maxTurns(limit: Int(maxTurns), usage: usage, message: message)
        case let .BudgetExceeded(budget, limit, spent, cost, usage, message):
            self = .budgetExceeded(budget: budget, limit: limit, spent: spent, cost: cost, usage: usage, message: message)
        case let .OutputTruncated(tools, usage, message):
            self = .outputTruncated(tools: tools, usage: usage, message: message)
        case let .OutputInvalid(attempt, retries, usage, message):
            self = .outputInvalid(attempt: attempt, retries: Int(retries), usage: usage, message: message)
        case let .InvalidMessage(index, field, message):
            self = .invalidMessage(index: Int(index), field: field, message: message)
        case let .HookFailed(hook, point, message): self = .hookFailed(hook: hook, point: point, message: message)
        case let .GuardrailTripped(guardrail, kind, verdictJson, message):
            self = .guardrailTripped(guardrail: guardrail, kind: kind, verdictJSON: verdictJson, message: message)
        case let .Cancelled(message): self = .cancelled(message: message)
        case let .Internal(message): self = .internal(message: message)
        }
    }
}

/// A final answer's type given as a JSON Schema for an object (`Agent(outputType:)`): the answer is JSON
/// matching it, asked of the provider natively where the wire has it (Chat Completions, Responses) and
/// through a `final_answer` tool elsewhere; a wrong answer goes back to the model up to `retries` times
/// (default 2), then the run throws `AmbitError.outputInvalid`. Decode the answer with
/// `result.decode(YourCodable.self)`.
public struct OutputSchema: Sendable {
    /// 1 to 64 letters, digits, `_` or `-`.
    public let name: String
    /// The schema as JSON text.
    public let schemaJSON: String
    public let retries: Int?

    /// `schema` as JSON text.
    public init(name: String, schemaJSON: String, retries: Int? = nil) {
        self.name = name
        self.schemaJSON = schemaJSON
        self.retries = retries
    }

    /// `schema` as a JSON object (`[String: Any]`); throws `AmbitError.config` when it is not one.
    public init(name: String, schema: [String: Any], retries: Int? = nil) throws {
        guard JSONSerialization.isValidJSONObject(schema),
            let data = try? JSONSerialization.data(withJSONObject: schema, options: [.sortedKeys])
        else {
            throw AmbitError.config(message: "invalid configuration: the schema of output type '\(name)' is not JSON")
        }
        self.init(name: name, schemaJSON: String(decoding: data, as: UTF8.self), retries: retries)
    }

    /// The core's `OutputType` as JSON text.
    func json() throws -> String {
        guard let schema = try? JSONSerialization.jsonObject(with: Data(schemaJSON.utf8)) else {
            throw AmbitError.config(message: "invalid configuration: the schema of output type '\(name)' is not JSON")
        }
        var out: [String: Any] = ["name": name, "schema": schema]
        if let retries { out["retries"] = retries }
        let data = try JSONSerialization.data(withJSONObject: out, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

extension RunResult {
    /// The final answer decoded as `T` (a `Decodable` matching the agent's output type). Throws
    /// `AmbitError.config` when the agent has no output type or the answer does not decode as `T`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard let json = structuredOutputJson else {
            throw AmbitError.config(message: "the agent has no output type: the answer is text")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        } catch {
            throw AmbitError.config(message: "the typed answer does not decode as \(T.self): \(error)")
        }
    }
}

extension StopReason {
    /// The reason's name, the same in every language: `end`, `tool_calls`, `length`, `content_filter`,
    /// `refusal` or `other`.
    public var name: String {
        switch self {
        case .end: return "end"
        case .toolCalls: return "tool_calls"
        case .length: return "length"
        case .contentFilter: return "content_filter"
        case .refusal: return "refusal"
        case .other: return "other"
        }
    }
}

/// An agent another may hand work to by name (`Agent(..., agents: ["researcher": NamedAgent(researcher,
/// description: "Looks up weather; one city per task.")])`): the caller gets `agent_list_named` and
/// `agent_delegate`; the named agent runs with its own instructions, tools and model, inside the caller's
/// reach (the level, directories and network both hold).
public struct NamedAgent: Sendable {
    public let agent: Agent
    /// When and how to use it: the caller's model reads it in `agent_list_named`.
    public let description: String

    public init(_ agent: Agent, description: String) {
        self.agent = agent
        self.description = description
    }
}

/// An agent: a model, instructions and tools. Safe to share; runs share nothing but configuration.
public final class Agent: Sendable {
    let core: CoreAgent

    /// Builds the agent. A bad configuration (duplicate tool names, parameters that are not a JSON object
    /// schema, `maxTurns` below 1, an unknown built-in, a policy directory that does not exist, …) throws
    /// `AmbitError.config`. `policy`: the permission policy (none: `.unrestricted`, approvals off);
    /// `builtins`: built-in tools by name (`builtinToolNames`), registered after `tools`.
    /// `mcpServers`: MCP servers (`McpServer.stdio`, `.http`), connected before the first model request;
    /// `deferral`: which tools wait in the catalog until the model loads them (MCP tools by default).
    /// `subagents`: the five agent tools (`SubagentSettings(maxDepth:memory:)`); a sub-agent is never
    /// wider than its parent, and a wider request is refused by name. `ledger`: the work ledger's four
    /// tools bound to one run of a routine (`ledger.tools(scope:routineId:runId:)`). `memory` (an opened
    /// `Memory`) with `agentName` (the agent's namespace in it): the `memory_*` tools and the agent's
    /// baseline after the instructions on every request. `skills` (`Skills(dirs:agentManaged:)`): the
    /// skills index after the instructions, `skill_read` and `skill_search`, and when agent-managed
    /// `skill_write`, `skill_edit` and `skill_delete` (never given to a sub-agent). `knowledge`
    /// (`Knowledge(dir:)`): `knowledge_list` and `knowledge_read` over its directory. `outputType`
    /// (`OutputSchema`): the final answer is JSON of that type, checked by the core;
    /// `result.decode(YourCodable.self)` decodes it. `profiles` (`["fast": Model(...)]`): the models
    /// `agent_spawn`'s `profile` may name, kept on every follow-up, never widening a sub-agent.
    /// `agents` (`["name": NamedAgent(agent, description:)]`): `agent_list_named` and `agent_delegate`.
    /// `hooks` (`[Hook(.beforeToolCall, name: "audit") { ctx, payload in .proceed }]`): your code at each
    /// point of a run (Hooks.swift); `inputGuardrails`, `outputGuardrails` (`Guardrail(name:) { ... }`):
    /// checks that stop the run with `AmbitError.guardrailTripped`. `vision`: the model takes images (as
    /// Python `vision=True`, Node `vision: true`): adds `image_render`, which shows the model an image
    /// held as base64 or in a scratchpad entry; off, a text-only model is never offered it.
    public init(
        model: Model, instructions: String? = nil, tools: [any AmbitTool] = [], maxTurns: Int? = nil,
        policy: Policy? = nil, builtins: [String] = [], maxConcurrency: Int? = nil, maxTokens: Int? = nil,
        maxCost: Double? = nil, prices: [String: Price] = [:], checklist: Bool = false, checklistNudgeCap: Int? = nil,
        background: Bool = false, heartbeat: Double? = nil, scratchpad: Bool = false, vision: Bool = false,
        mcpServers: [McpServer] = [], deferral: Deferral? = nil, subagents: SubagentSettings? = nil,
        ledger: LedgerTools? = nil, memory: Memory? = nil, agentName: String? = nil,
        outputType: OutputSchema? = nil, skills: Skills? = nil, knowledge: Knowledge? = nil,
        credentials: Credentials? = nil, profiles: [String: Model] = [:], agents: [String: NamedAgent] = [:],
        hooks: [Hook] = [], inputGuardrails: [Guardrail] = [], outputGuardrails: [Guardrail] = []
    ) throws {
        var turns: UInt32? = nil
        if let maxTurns {
            guard let n = UInt32(exactly: maxTurns) else {
                throw AmbitError.config(message: "invalid configuration: max_turns must be at least 1, got \(maxTurns)")
            }
            turns = n
        }
        let config = AgentConfig(
            model: model.settings,
            settings: LoopSettings(
                maxConcurrency: maxConcurrency.map { UInt32(clamping: max($0, 0)) },
                maxTokens: maxTokens.map { UInt64(clamping: max($0, 0)) },
                maxCost: maxCost,
                prices: prices,
                checklist: checklist,
                checklistNudgeCap: checklistNudgeCap.map { UInt32(clamping: max($0, 0)) },
                background: background,
                heartbeatSecs: heartbeat,
                scratchpad: scratchpad,
                vision: vision
            ),
            instructions: instructions,
            maxTurns: turns,
            tools: tools.map { tool in
                ToolDefinition(
                    name: tool.name,
                    description: tool.description,
                    parametersJson: tool.parameters,
                    implementation: ToolAdapter(tool),
                    level: tool.level,
                    requiresApproval: tool.requiresApproval,
                    allowBlank: tool.allowBlank,
                    idempotent: tool.idempotent,
                    credentials: tool.credentials
                )
            },
            policy: policy?.settings,
            builtins: builtins,
            toolingJson: try toolingJSON(mcpServers, deferral),
            mcpHooks: mcpServers.flatMap(\.hooks),
            subagents: subagents,
            credentialsJson: try credentials?.json(),
            credentialCallbacks: credentials?.callbackAliases ?? [],
            credentialSource: credentials.map { CredentialAdapter($0) },
            ledger: ledger?.core,
            memory: memory?.core,
            agentName: agentName,
            outputJson: try outputType?.json(),
            skills: try skills?.settings(),
            knowledge: try knowledge?.settings(),
            testModelJson: model.test?.json,
            modelFunction: model.test?.function.map { ReplyFunctionAdapter($0) },
            profiles: profiles.sorted { $0.key < $1.key }.map { name, m in
                ProfileSettings(name: name, model: m.settings, testModelJson: m.test?.json,
                                modelFunction: m.test?.function.map { ReplyFunctionAdapter($0) })
            },
            namedAgents: agents.sorted { $0.key < $1.key }.map { name, n in
                NamedAgentSettings(name: name, description: n.description, agent: n.agent.core)
            },
            hooks: hooks.map(\.settings),
            guardrails: inputGuardrails.map { $0.settings(kind: "input") }
                + outputGuardrails.map { $0.settings(kind: "output") }
        )
        do {
            core = try CoreAgent(config: config)
        } catch {
            throw AmbitError(error)
        }
    }

    private init(core: CoreAgent) { self.core = core }

    /// The same agent under another policy, keeping its sub-agents (and its model, instructions, tools,
    /// MCP servers and settings); this agent is unchanged. A sub-agent spawned before is re-admitted
    /// against the new policy's reach when it is followed up: a level dropped to narrows it (its report
    /// says `Permission: read`), a directory no longer held refuses the follow-up. A bad policy (a
    /// directory that does not exist, an empty allow list) throws `AmbitError.config`.
    ///
    /// ```swift
    /// let agent = try Agent(model: model, policy: Policy(level: .workspace), subagents: SubagentSettings())
    /// _ = try await agent.run("spawn a helper")
    /// let narrowed = try agent.withPolicy(Policy(level: .read))
    /// _ = try await narrowed.run("follow up with the helper")  // the helper now runs at read
    /// ```
    public func withPolicy(_ policy: Policy) throws -> Agent {
        do {
            return Agent(core: try core.withPolicy(policy: policy.settings))
        } catch {
            throw AmbitError(error)
        }
    }

    /// The names of the tools, in registration order. Throws `AmbitError.internal` only on a bug in
    /// ambit (a panic in the core, caught).
    public var toolNames: [String] {
        get throws {
            do { return try core.toolNames() } catch { throw AmbitError(error) }
        }
    }

    /// Every tool (host tools, then built-ins, then MCP tools once their server was listed) with its
    /// effective level, declared level, status (`deferred` and `hidden` by the deferral settings) and
    /// whether its calls go to the approval handler. Throws `AmbitError.internal` only on a bug in ambit.
    public func listTools() throws -> [ToolListing] {
        do { return try core.listTools() } catch { throw AmbitError(error) }
    }

    /// Connects the MCP servers not yet connected and re-lists those that changed, as a run does before
    /// each model request; `listTools()` then shows their tools. A server that fails is reported
    /// unavailable (to the model, in the catalog), not thrown; the only error is `AmbitError.internal`,
    /// a bug in ambit.
    public func refreshTools() async throws {
        do { try await core.refreshTools() } catch { throw AmbitError(error) }
    }

    /// Runs the agent like `run(_:)`, as its events in order; the last is `.runFinished` with the result.
    /// A failed run throws its `AmbitError` after the events before it. Ending the iteration early
    /// cancels the run.
    public func stream(_ input: String) -> AsyncThrowingStream<AgentEvent, any Error> {
        let feed: CoreRunStream
        do {
            feed = try core.stream(input: input)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: AmbitError(error)) }
        }
        return eventStream(feed)
    }

    /// Runs the agent from one user message to the final answer. Cancelling the Swift `Task` that awaits
    /// it cancels the run, its HTTP request and its tools, and throws `AmbitError.cancelled`.
    public func run(_ input: String) async throws -> RunResult {
        // One crossing for the whole run (`CoreRun.result`), not one per event: the run is polled in
        // this call's Rust future, and the result comes back as it is. A cancelled Task cancels it.
        do {
            let run = try core.startRun(input: input)
            return try await withTaskCancellationHandler {
                try await run.result()
            } onCancel: {
                // Nobody is left to hear a failure to cancel (a bug in ambit); the run then ends on its own.
                try? run.cancel()
            }
        } catch {
            throw AmbitError(error)
        }
    }
}

extension ToolCall {
    /// The arguments as the model sent them, decoded (nil when they are not JSON).
    public var arguments: Any? {
        try? JSONSerialization.jsonObject(with: Data(argumentsJson.utf8), options: [.fragmentsAllowed])
    }
}

/// Adapts `Credentials`' callbacks to the generated `HostCredentials` the core calls.
final class CredentialAdapter: HostCredentials {
    private let credentials: Credentials

    init(_ credentials: Credentials) { self.credentials = credentials }

    func fetch(alias: String) async throws -> String {
        guard let callback = credentials.callbacks[alias] else {
            throw HostToolError.Failed(message: "credential '\(alias)': no callback")
        }
        do {
            return try await callback(alias)
        } catch {
            throw HostToolError.Failed(message: ToolAdapter.message(of: error))
        }
    }
}

/// Adapts an `AmbitTool` to the generated `HostTool` the core calls.
final class ToolAdapter: HostTool {
    private let tool: any AmbitTool

    init(_ tool: any AmbitTool) { self.tool = tool }

    func call(argumentsJson: String, task: UInt64, credentialsJson: String, context: UInt64) async throws -> String {
        // The core only calls a tool with a JSON object.
        let parsed = try? JSONSerialization.jsonObject(with: Data(argumentsJson.utf8))
        guard let arguments = parsed as? [String: Any] else {
            throw HostToolError.Failed(message: "the arguments are not a JSON object: \(argumentsJson)")
        }
        do {
            let values = (try? JSONSerialization.jsonObject(with: Data(credentialsJson.utf8))) as? [String: String]
            let taskContext = TaskContext(token: task, credentialValues: values ?? [:], contextID: context)
            return try await tool.call(arguments: arguments, context: taskContext)
        } catch {
            throw HostToolError.Failed(message: Self.message(of: error))
        }
    }

    static func message(of error: any Error) -> String {
        if let localized = error as? LocalizedError, let text = localized.errorDescription, !text.isEmpty {
            return text
        }
        return String(describing: error)
    }
}

/// A run's event feed as a stream: a failed run throws its `AmbitError` after the events before it;
/// ending the iteration early cancels the run; `ended` runs once the feed is done with.
func eventStream(_ feed: CoreRunStream, ended: @escaping @Sendable () -> Void = {}) -> AsyncThrowingStream<AgentEvent, any Error> {
    AsyncThrowingStream { continuation in
        let task = Task {
            defer { ended() }
            do {
                while let event = try await feed.next() {
                    continuation.yield(event)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: AmbitError(error))
            }
        }
        continuation.onTermination = { _ in
            task.cancel()
            // Nobody is left to hear a failure to cancel (a bug in ambit); the run then ends on its own.
            try? feed.cancel()
        }
    }
}
