// A conversation as ambit keeps it, the same in every language: the provider-neutral messages a run
// returns in `result.messages` and takes back as its input (`agent.run(messages:)`), so a host can keep its
// own history. `Message` is `Codable` in the core's JSON form, which Rust, Python and Node read and write
// too. And the run context: a host value handed to the run's tools, kept here, never serialized.

import Foundation

/// Any JSON value: a provider message's items, kept verbatim.
public enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case let .bool(b): try c.encode(b)
        case let .number(n): try c.encode(n)
        case let .string(s): try c.encode(s)
        case let .array(a): try c.encode(a)
        case let .object(o): try c.encode(o)
        }
    }
}

/// A tool call an assistant message asked for: `arguments` is the JSON text the model wrote.
public struct MessageToolCall: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var arguments: String
    /// Read from the answer's text rather than sent as a call (the `textToolCalls` setting).
    public var fromText: Bool

    public init(id: String, name: String, arguments: String, fromText: Bool = false) {
        self.id = id
        self.name = name
        self.arguments = arguments
        self.fromText = fromText
    }

    enum CodingKeys: String, CodingKey {
        case id, name, arguments
        case fromText = "from_text"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        name = try c.decode(String.self, forKey: .name)
        arguments = try c.decode(String.self, forKey: .arguments)
        fromText = try c.decodeIfPresent(Bool.self, forKey: .fromText) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(name, forKey: .name)
        try c.encode(arguments, forKey: .arguments)
        if fromText { try c.encode(true, forKey: .fromText) }
    }
}

/// One entry of a conversation. Each call of an assistant message gets its `.tool` result (by `callId`)
/// before the next user or assistant message.
public enum Message: Codable, Sendable, Equatable {
    /// What the user said.
    case user(String)
    /// The model's answer: its text (nil when it only called tools) and the calls it asked for.
    case assistant(content: String?, toolCalls: [MessageToolCall])
    /// The result of the call `callId` of an earlier assistant message.
    case tool(callId: String, name: String, content: String, isError: Bool)
    /// Items the provider answered itself (its own tool search), kept verbatim for the wire `wire`.
    case provider(wire: String, items: [JSONValue])

    enum CodingKeys: String, CodingKey {
        case role, content, name, wire, items
        case toolCalls = "tool_calls"
        case callId = "call_id"
        case isError = "is_error"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let role = try c.decode(String.self, forKey: .role)
        switch role {
        case "user":
            self = .user(try c.decode(String.self, forKey: .content))
        case "assistant":
            self = .assistant(
                content: try c.decodeIfPresent(String.self, forKey: .content),
                toolCalls: try c.decodeIfPresent([MessageToolCall].self, forKey: .toolCalls) ?? [])
        case "tool":
            self = .tool(
                callId: try c.decode(String.self, forKey: .callId), name: try c.decode(String.self, forKey: .name),
                content: try c.decode(String.self, forKey: .content),
                isError: try c.decodeIfPresent(Bool.self, forKey: .isError) ?? false)
        case "provider":
            self = .provider(wire: try c.decode(String.self, forKey: .wire),
                             items: try c.decodeIfPresent([JSONValue].self, forKey: .items) ?? [])
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .role, in: c, debugDescription: "unknown role '\(role)' (expected user, assistant, tool or provider)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case let .user(content):
            try c.encode("user", forKey: .role)
            try c.encode(content, forKey: .content)
        case let .assistant(content, toolCalls):
            try c.encode("assistant", forKey: .role)
            if let content { try c.encode(content, forKey: .content) } else { try c.encodeNil(forKey: .content) }
            try c.encode(toolCalls, forKey: .toolCalls)
        case let .tool(callId, name, content, isError):
            try c.encode("tool", forKey: .role)
            try c.encode(callId, forKey: .callId)
            try c.encode(name, forKey: .name)
            try c.encode(content, forKey: .content)
            try c.encode(isError, forKey: .isError)
        case let .provider(wire, items):
            try c.encode("provider", forKey: .role)
            try c.encode(wire, forKey: .wire)
            try c.encode(items, forKey: .items)
        }
    }
}

extension RunResult {
    /// The whole conversation, the input first: pass it back, with a new `.user` message, as the next
    /// run's input (`agent.run(messages:)`) to continue it.
    public var messages: [Message] {
        (try? JSONDecoder().decode([Message].self, from: Data(messagesJson.utf8))) ?? []
    }
}

/// The host values of the runs under way, by id: a run's context stays here, in Swift; the core carries
/// only its id to the run's tools, so it is never serialized, sent to a model or stored.
final class RunContexts: @unchecked Sendable {
    static let shared = RunContexts()
    private let lock = NSLock()
    private var values: [UInt64: any Sendable] = [:]
    private var next: UInt64 = 0

    /// Keeps `value` for one run; its id (0: no context).
    func enter(_ value: (any Sendable)?) -> UInt64 {
        guard let value else { return 0 }
        lock.lock()
        defer { lock.unlock() }
        next += 1
        values[next] = value
        return next
    }

    func leave(_ id: UInt64) {
        guard id != 0 else { return }
        lock.lock()
        values[id] = nil
        lock.unlock()
    }

    func value(_ id: UInt64) -> (any Sendable)? {
        guard id != 0 else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return values[id]
    }
}

extension Agent {
    /// Runs the agent from one user message, with `context`: a value of yours every tool of the run
    /// reads as `context.context` (a database pool, the current user). It is never sent to the model nor
    /// stored.
    public func run(_ input: String, context: any Sendable) async throws -> RunResult {
        try await finish(events(input, messagesJSON: nil, context: context))
    }

    /// Runs the agent on a conversation you keep (an earlier `result.messages` and a new `.user`
    /// message). A history that breaks a rule throws `AmbitError.invalidMessage` naming the message's
    /// index and field; nothing is sent.
    public func run(messages: [Message], context: (any Sendable)? = nil) async throws -> RunResult {
        try await finish(stream(messages: messages, context: context))
    }

    /// `run(messages:)` on a history in the core's JSON form (as another language or your store keeps it).
    public func run(messagesJSON: String, context: (any Sendable)? = nil) async throws -> RunResult {
        try await finish(events("", messagesJSON: messagesJSON, context: context))
    }

    /// `stream(_:)` with a context for the run's tools.
    public func stream(_ input: String, context: any Sendable) -> AsyncThrowingStream<AgentEvent, any Error> {
        events(input, messagesJSON: nil, context: context)
    }

    /// `stream(_:)` on a conversation you keep (see `run(messages:)`).
    public func stream(messages: [Message], context: (any Sendable)? = nil) -> AsyncThrowingStream<AgentEvent, any Error> {
        let json: String
        do {
            json = String(decoding: try JSONEncoder().encode(messages), as: UTF8.self)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: AmbitError.config(message: "messages: \(error)")) }
        }
        return events("", messagesJSON: json, context: context)
    }

    /// `stream(messages:)` on a history in the core's JSON form.
    public func stream(messagesJSON: String, context: (any Sendable)? = nil) -> AsyncThrowingStream<AgentEvent, any Error> {
        events("", messagesJSON: messagesJSON, context: context)
    }

    /// The run's events, its context kept for as long as it runs.
    func events(_ input: String, messagesJSON: String?, context: (any Sendable)?) -> AsyncThrowingStream<AgentEvent, any Error> {
        let id = RunContexts.shared.enter(context)
        let feed: CoreRunStream
        do {
            feed = try core.streamInput(input: input, messagesJson: messagesJSON, context: id)
        } catch {
            RunContexts.shared.leave(id)
            return AsyncThrowingStream { $0.finish(throwing: AmbitError(error)) }
        }
        return eventStream(feed) { RunContexts.shared.leave(id) }
    }

    /// A stream's run, to its result (as `run(_:)` does).
    func finish(_ events: AsyncThrowingStream<AgentEvent, any Error>) async throws -> RunResult {
        var finished: RunResult?
        do {
            for try await event in events {
                if case let .runFinished(_, result) = event { finished = result }
            }
        } catch {
            throw AmbitError(error)
        }
        if let finished { return finished }
        throw AmbitError.cancelled(
            message: Task.isCancelled ? "the run was cancelled (its Task was cancelled)" : "the run ended without a result")
    }
}
