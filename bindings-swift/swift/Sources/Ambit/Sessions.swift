// Sessions (SPEC §8): an append-only conversation log in SQLite (`sqlite:///path`) or PostgreSQL
// (`postgres://…`). A run in a session continues it; compaction appends a boundary and a summary and
// never deletes; a run whose approval handler answers `.later` parks, and `resume` — from any process
// and language that opens the same store — continues it. Every rule lives in the Rust core.

import Foundation

/// A session call that failed, or a run that parked.
public enum SessionError: Error, Equatable, CustomStringConvertible {
    /// The run parked (code `awaiting_approval`): `request` is what it waits on. A signal, not a failure.
    case awaitingApproval(sessionId: String, request: [String: String], message: String)
    case notFound(message: String)
    case invalidArgument(message: String)
    case store(message: String)
    /// Another run holds the session (code `session_busy`): one run at a time per session, across
    /// processes.
    case busy(message: String)
    /// A resume of a session with no approval waiting (code `session_not_parked`): another resume
    /// claimed it first, or it was never parked.
    case notParked(message: String)
    /// The run itself failed, with the code `Agent.run` would have thrown (never `internal`).
    case run(code: String, message: String)
    /// A bug in ambit (code `internal`): a panic was caught at the boundary, in the session call or in its
    /// run, instead of taking the process down.
    case `internal`(message: String)

    public var code: String {
        switch self {
        case .awaitingApproval: return "awaiting_approval"
        case .notFound: return "session_not_found"
        case .invalidArgument: return "invalid_argument"
        case .store: return "session_store"
        case .busy: return "session_busy"
        case .notParked: return "session_not_parked"
        case let .run(code, _): return code
        case .internal: return "internal"
        }
    }

    public var description: String {
        switch self {
        case let .awaitingApproval(_, _, message), let .notFound(message), let .invalidArgument(message),
             let .store(message), let .busy(message), let .notParked(message), let .run(_, message),
             let .internal(message):
            return message
        }
    }

    init(_ error: SessionCoreError) {
        switch error {
        case let .AwaitingApproval(sessionId, requestJson, message):
            let object = (try? JSONSerialization.jsonObject(with: Data(requestJson.utf8))) as? [String: Any] ?? [:]
            let request = object.compactMapValues { value -> String? in
                if let s = value as? String { return s }
                guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]) else {
                    return nil
                }
                return String(decoding: data, as: UTF8.self)
            }
            self = .awaitingApproval(sessionId: sessionId, request: request, message: message)
        case let .NotFound(message): self = .notFound(message: message)
        case let .InvalidArgument(message): self = .invalidArgument(message: message)
        case let .Store(message): self = .store(message: message)
        case let .Busy(message): self = .busy(message: message)
        case let .NotParked(message): self = .notParked(message: message)
        case let .Run(code, message): self = .run(code: code, message: message)
        case let .Internal(message): self = .internal(message: message)
        }
    }
}

/// A background task's result that landed in a session after the run that started it ended; the result
/// is now the session's last turn.
public struct Delivery: Sendable, Equatable, Decodable {
    public let sessionId: String
    public let taskId: String
    /// The tool the task ran.
    public let name: String
    /// `finished`, `failed` or `cancelled`.
    public let status: String
    public let result: String
}

/// A session's background task as the store has it (`Sessions.taskResult`).
public struct TaskSnapshot: Sendable, Equatable, Decodable {
    public let sessionId: String
    public let taskId: String
    /// The tool the task runs.
    public let name: String
    /// `running`, `finished`, `failed`, `cancelled`, or `lost` (its process died).
    public let status: String
    /// The latest progress note.
    public let note: String?
    /// The result text, once it landed.
    public let result: String?
}

/// The session tools, by built-in name: `Agent(..., builtins: sessionTools)`.
public let sessionTools = [
    "conversation_search", "conversation_read", "session_list", "session_search", "context_check", "context_compact",
]

/// An open session store.
public final class Sessions: @unchecked Sendable {
    let core: CoreSessions

    /// Wraps the core's store (`open`, or a test hook such as `testingOpenSessions`).
    init(core: CoreSessions) {
        self.core = core
    }

    /// Opens the store, applying its migrations. Auto-compaction fires when a run would start past
    /// `compactAt` of the context window: the model's (`Model.contextWindow`, else its family's
    /// default) unless `contextWindow` names one for this store; a compaction keeps the latest
    /// `keepRecent` rounds verbatim.
    ///
    /// `leaseMs`: how long a run holds the session unless its heartbeat renews it (default 30 000; also
    /// how long a background task's process may stay silent before the task is read `lost`).
    /// `busyWaitMs`: how long a run on a session another run holds waits for it before it is refused with
    /// `SessionError.busy` (default: refused at once; at most one hour).
    public static func open(_ url: String, contextWindow: Int? = nil, compactAt: Double = 0.85,
                            keepRecent: Int = 2, leaseMs: Int? = nil, busyWaitMs: Int? = nil) async throws -> Sessions {
        try await wrap {
            Sessions(core: try await CoreSessions.open(
                url: url, contextWindow: contextWindow.map { UInt64(clamping: max($0, 0)) }, compactAt: compactAt,
                keepRecent: UInt32(clamping: max(keepRecent, 0)), leaseMs: leaseMs.map { UInt64(clamping: max($0, 0)) },
                busyWaitMs: busyWaitMs.map { UInt64(clamping: max($0, 0)) }))
        }
    }

    /// A new, empty session; its id.
    public func create() async throws -> String {
        try await Sessions.wrap { try await self.core.create() }
    }

    /// Runs `agent` on `input` in the session, continuing its conversation. A parked run throws
    /// `SessionError.awaitingApproval`. `context`: a value of yours every tool, hook and guardrail of the
    /// run reads as `context.context` (never sent to the model, never stored).
    public func run(_ agent: Agent, sessionId: String, input: String, context: (any Sendable)? = nil) async throws
        -> RunResult
    {
        let id = RunContexts.shared.enter(context)
        defer { RunContexts.shared.leave(id) }
        return try await Sessions.wrap {
            try await self.core.run(agent: agent.core, sessionId: sessionId, input: input, context: id, messagesJson: nil)
        }
    }

    /// Runs `agent` in the session on one user message made of parts (text, images, files), as
    /// `agent.run(parts:)` takes them. The parts are stored in the session, so later turns (and a resume
    /// in another process) send the image again; a part the core refuses throws
    /// `SessionError.run(code: "invalid_message", ...)` naming it, and nothing is stored.
    public func run(_ agent: Agent, sessionId: String, parts: [Part], context: (any Sendable)? = nil) async throws
        -> RunResult
    {
        let id = RunContexts.shared.enter(context)
        defer { RunContexts.shared.leave(id) }
        let json = Agent.partsJSON(parts)
        return try await Sessions.wrap {
            try await self.core.run(agent: agent.core, sessionId: sessionId, input: "", context: id, messagesJson: json)
        }
    }

    /// Answers the approval a parked session waits on and continues the run as if the answer had come live
    /// (`context` as in `run`: a parked run's context is not stored, so give it again).
    public func resume(
        _ agent: Agent, sessionId: String, decision: ApprovalDecision, context: (any Sendable)? = nil
    ) async throws -> RunResult {
        let id = RunContexts.shared.enter(context)
        defer { RunContexts.shared.leave(id) }
        return try await Sessions.wrap {
            try await self.core.resume(agent: agent.core, sessionId: sessionId, decision: decision, context: id)
        }
    }

    /// The approval request a parked session waits on, as JSON text; nil when it is not parked.
    public func pending(_ sessionId: String) async throws -> String? {
        try await Sessions.wrap { try await self.core.pending(sessionId: sessionId) }
    }

    /// Compacts now (the agent's model writes the summary); false when there was nothing to summarise.
    public func compact(_ agent: Agent, sessionId: String) async throws -> Bool {
        try await Sessions.wrap { try await self.core.compact(agent: agent.core, sessionId: sessionId) }
    }

    /// `conversation_search`: matching lines tagged `#N role:`.
    public func search(_ sessionId: String, _ query: String, isRegex: Bool = false, limit: Int = 20) async throws -> String {
        try await Sessions.wrap {
            try await self.core.search(sessionId: sessionId, query: query, isRegex: isRegex,
                                       limit: UInt32(clamping: max(limit, 0)))
        }
    }

    /// `conversation_read`: up to 20 entries from `#start`.
    public func read(_ sessionId: String, start: Int, limit: Int = 1) async throws -> String {
        try await Sessions.wrap {
            try await self.core.read(sessionId: sessionId, start: Int64(start), limit: UInt32(clamping: max(limit, 0)))
        }
    }

    /// The whole log as JSON text, boundaries and summaries included.
    public func entriesJSON(_ sessionId: String) async throws -> String {
        try await Sessions.wrap { try await self.core.entriesJson(sessionId: sessionId) }
    }

    /// Work that outlives the run (SPEC §8b): a run in a session ends without waiting for its background
    /// tasks; each result lands in the session as its own turn when it comes and is announced here, from
    /// the moment this is called (as this process runs the task). Continue the session with `run`.
    public func deliveries() throws -> AsyncStream<Delivery> {
        let next: CoreDeliveries
        do {
            next = try core.deliveries()
        } catch let error as SessionCoreError {
            throw SessionError(error)
        }
        return AsyncStream { continuation in
            let task = Task {
                while !Task.isCancelled, let text = try? await next.nextJson() {
                    if let delivery = try? Sessions.decode(Delivery.self, text) { continuation.yield(delivery) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// A session's background task from any process: its status (`lost` when its process died), latest
    /// progress note and result. An unknown id is `SessionError.invalidArgument` naming it.
    public func taskResult(_ sessionId: String, taskId: String) async throws -> TaskSnapshot {
        let text = try await Sessions.wrap { try await self.core.taskResultJson(sessionId: sessionId, taskId: taskId) }
        do {
            return try Sessions.decode(TaskSnapshot.self, text)
        } catch {
            throw SessionError.internal(message: "the core's task snapshot did not decode: \(error)")
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(type, from: Data(text.utf8))
    }

    private static func wrap<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SessionCoreError {
            throw SessionError(error)
        } catch {
            // Anything else the generated layer throws is a bug in ambit.
            throw SessionError.internal(message: AmbitError(error).message)
        }
    }
}
