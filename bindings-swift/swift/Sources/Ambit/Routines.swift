// Routines (SPEC §13): standing work on a schedule, run by any number of runner processes over one
// store (`sqlite:///path` or `postgres://…`).
//
//     let routines = try await Routines.open("sqlite:///var/lib/app/routines.db")
//     _ = try await routines.create(RoutineDefinition(agent: "po-chaser", instructions: "Chase POs.",
//                                                     intervalSeconds: 1800), actor: "alice")
//     let runner = try Runner(routines: routines, sessions: sessions,
//                             agents: ["po-chaser": { ctx in try Agent(model: model, ledger: ctx.tools) }])
//     try await runner.runForever()          // or: try await runner.tick()
//
// It only translates: Swift values to the core's JSON and back, `RoutineCoreError` into `RoutineError`
// (a refused field named in lowerCamelCase). Every rule lives in the Rust core. Times are milliseconds
// since the Unix epoch.

import Foundation

/// A routine call refused or failed. `code` is the same in every language.
public enum RoutineError: Error, Equatable, LocalizedError, CustomStringConvertible {
    /// A field of a definition, an update or an option is wrong; `field` names it (lowerCamelCase).
    case invalid(field: String, message: String)
    /// No routine with that id.
    case notFound(message: String)
    /// The store failed: unreachable, I/O, a migration that does not apply.
    case store(message: String)
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down.
    case `internal`(message: String)

    public var code: String {
        switch self {
        case .invalid: return "invalid_argument"
        case .notFound: return "routine_not_found"
        case .store: return "routine_store"
        case .internal: return "internal"
        }
    }

    /// The field an `invalid` error names; nil for the others.
    public var field: String? {
        if case let .invalid(field, _) = self { return field }
        return nil
    }

    public var message: String {
        switch self {
        case let .invalid(_, m), let .notFound(m), let .store(m), let .internal(m): return m
        }
    }

    public var errorDescription: String? { message }
    public var description: String { "\(code): \(message)" }

    init(_ error: Error) {
        switch error {
        case let e as RoutineError: self = e
        case let RoutineCoreError.Invalid(field, message): self = .invalid(field: lowerCamel(field), message: message)
        case let RoutineCoreError.NotFound(message): self = .notFound(message: message)
        case let RoutineCoreError.Store(message): self = .store(message: message)
        case let RoutineCoreError.Internal(message): self = .internal(message: message)
        // Anything else the generated layer throws is a bug in ambit, never a store failure.
        default: self = .internal(message: AmbitError(error).message)
        }
    }
}

/// `interval_seconds` as `intervalSeconds`.
private func lowerCamel(_ name: String) -> String {
    let parts = name.split(separator: "_", omittingEmptySubsequences: false)
    guard let first = parts.first else { return name }
    return ([String(first)] + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }).joined()
}

/// When a routine may start a run: weekdays (`mon` … `sun`), `HH:MM` start and end, an IANA time zone.
public struct ActiveWindow: Codable, Sendable, Equatable {
    public var weekdays: [String]
    public var start: String
    public var end: String
    public var timezone: String

    public init(weekdays: [String], start: String, end: String, timezone: String) {
        self.weekdays = weekdays
        self.start = start
        self.end = end
        self.timezone = timezone
    }
}

/// A routine's definition: an interval or a cron expression (with its time zone). Absent fields take the
/// core's defaults (enabled, `catchUp` 1, `parallelLimit` 1).
public struct RoutineDefinition: Codable, Sendable, Equatable {
    public var id: String?
    public var agent: String
    public var instructions: String
    public var title: String?
    public var intervalSeconds: Int64?
    public var cronExpression: String?
    public var timezone: String?
    public var activeWindow: ActiveWindow?
    public var enabled: Bool?
    public var parallelLimit: Int64?
    public var catchUp: Int64?
    public var dailyCap: Int64?
    public var model: String?

    public init(id: String? = nil, agent: String, instructions: String, title: String? = nil,
                intervalSeconds: Int64? = nil, cronExpression: String? = nil, timezone: String? = nil,
                activeWindow: ActiveWindow? = nil, enabled: Bool? = nil, parallelLimit: Int64? = nil,
                catchUp: Int64? = nil, dailyCap: Int64? = nil, model: String? = nil) {
        self.id = id
        self.agent = agent
        self.instructions = instructions
        self.title = title
        self.intervalSeconds = intervalSeconds
        self.cronExpression = cronExpression
        self.timezone = timezone
        self.activeWindow = activeWindow
        self.enabled = enabled
        self.parallelLimit = parallelLimit
        self.catchUp = catchUp
        self.dailyCap = dailyCap
        self.model = model
    }
}

/// One field of an update: a new value, or cleared (the title, a limit, the model or the window).
public enum Change<T: Encodable & Sendable>: Sendable {
    case set(T)
    case clear
}

/// An update: only the fields given change.
public struct RoutineChanges: Encodable, Sendable {
    public var agent: Change<String>?
    public var instructions: Change<String>?
    public var title: Change<String>?
    public var intervalSeconds: Change<Int64>?
    public var cronExpression: Change<String>?
    public var timezone: Change<String>?
    public var activeWindow: Change<ActiveWindow>?
    public var enabled: Change<Bool>?
    public var parallelLimit: Change<Int64>?
    public var catchUp: Change<Int64>?
    public var dailyCap: Change<Int64>?
    public var model: Change<String>?

    public init(agent: Change<String>? = nil, instructions: Change<String>? = nil, title: Change<String>? = nil,
                intervalSeconds: Change<Int64>? = nil, cronExpression: Change<String>? = nil,
                timezone: Change<String>? = nil, activeWindow: Change<ActiveWindow>? = nil,
                enabled: Change<Bool>? = nil, parallelLimit: Change<Int64>? = nil, catchUp: Change<Int64>? = nil,
                dailyCap: Change<Int64>? = nil, model: Change<String>? = nil) {
        self.agent = agent
        self.instructions = instructions
        self.title = title
        self.intervalSeconds = intervalSeconds
        self.cronExpression = cronExpression
        self.timezone = timezone
        self.activeWindow = activeWindow
        self.enabled = enabled
        self.parallelLimit = parallelLimit
        self.catchUp = catchUp
        self.dailyCap = dailyCap
        self.model = model
    }

    private enum Keys: String, CodingKey {
        case agent, instructions, title, timezone, enabled, model
        case intervalSeconds = "interval_seconds", cronExpression = "cron_expression"
        case activeWindow = "active_window", parallelLimit = "parallel_limit", catchUp = "catch_up"
        case dailyCap = "daily_cap"
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        func put<T>(_ change: Change<T>?, _ key: Keys) throws {
            switch change {
            case .none: break
            case let .set(value)?: try c.encode(value, forKey: key)
            case .clear?: try c.encodeNil(forKey: key)
            }
        }
        try put(agent, .agent)
        try put(instructions, .instructions)
        try put(title, .title)
        try put(intervalSeconds, .intervalSeconds)
        try put(cronExpression, .cronExpression)
        try put(timezone, .timezone)
        try put(activeWindow, .activeWindow)
        try put(enabled, .enabled)
        try put(parallelLimit, .parallelLimit)
        try put(catchUp, .catchUp)
        try put(dailyCap, .dailyCap)
        try put(model, .model)
    }
}

/// A stored routine: its definition, its revision, its next slot (nil while paused), and — from `get` —
/// its revision history, oldest first.
public struct Routine: Codable, Sendable, Equatable {
    public let id: String
    public let agent: String
    public let instructions: String
    public let title: String?
    public let intervalSeconds: Int64?
    public let cronExpression: String?
    public let timezone: String?
    public let activeWindow: ActiveWindow?
    public let enabled: Bool
    public let parallelLimit: Int64?
    public let catchUp: Int64
    public let dailyCap: Int64?
    public let model: String?
    public let revision: Int64
    public let createdAt: Int64
    public let updatedAt: Int64
    public let nextSlot: Int64?
    public let revisions: [Revision]?
}

/// One definition change, credited to the actor the host named.
public struct Revision: Codable, Sendable, Equatable {
    public let revision: Int64
    public let actor: String
    public let at: Int64
    /// `create`, `update` or `delete`.
    public let change: String
    public let definition: RoutineDefinition
}

/// One run of a routine. `state`: running, parked, finished or lost; `outcome`: success, nothing_to_do,
/// failure, error or unknown.
public struct RunRecord: Codable, Sendable, Equatable {
    public let id: String
    public let routineId: String
    public let revision: Int64
    /// `scheduled` or `drain`.
    public let kind: String
    public let slotAt: Int64?
    public let state: String
    public let runner: String
    public let sessionId: String
    public let startedAt: Int64
    public let endedAt: Int64?
    public let outcome: String?
    public let summary: String?
    public let toolCalls: Int64?
    public let toolErrors: Int64?
    public let inputTokens: Int64
    public let outputTokens: Int64
    public let cost: Double?
}

/// Slots that were not run: `reason` missed, daily_cap, window or disabled.
public struct SkippedSlots: Codable, Sendable, Equatable {
    public let routineId: String
    public let firstSlot: Int64
    public let lastSlot: Int64
    public let slots: Int64
    public let reason: String
    public let at: Int64
}

/// What one tick did; `resumed`: parked runs whose session a resume ended since (now finished).
public struct TickReport: Codable, Sendable, Equatable {
    public let started: [RunRecord]
    public let lost: [RunRecord]
    public let skipped: [SkippedSlots]
    public let resumed: [RunRecord]
}

private func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    do {
        return try decoder.decode(type, from: Data(text.utf8))
    } catch {
        throw RoutineError.internal(message: "the core's answer did not decode as \(T.self): \(error)")
    }
}

private func fields<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.keyEncodingStrategy = .convertToSnakeCase
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

private func wrap<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw RoutineError(error)
    }
}

/// The routine store on SQLite or PostgreSQL.
public final class Routines: @unchecked Sendable {
    let core: CoreRoutines

    init(core: CoreRoutines) { self.core = core }

    /// Opens the store, applying its migrations.
    public static func open(_ url: String) async throws -> Routines {
        try await wrap { Routines(core: try await CoreRoutines.open(url: url)) }
    }

    /// Creates a routine; revision 1, credited to `actor`.
    public func create(_ definition: RoutineDefinition, actor: String) async throws -> Routine {
        let text = try await wrap { try await core.create(definitionJson: try fields(definition), actor: actor) }
        return try decode(Routine.self, text)
    }

    /// A routine with its revision history (`revisions`, oldest first).
    public func get(_ id: String) async throws -> Routine {
        try decode(Routine.self, try await wrap { try await core.get(id: id) })
    }

    /// The revisions of a routine, also after it was deleted.
    public func revisions(_ id: String) async throws -> [Revision] {
        try decode([Revision].self, try await wrap { try await core.revisions(id: id) })
    }

    /// Every routine, or `agent`'s, by id.
    public func list(agent: String? = nil) async throws -> [Routine] {
        try decode([Routine].self, try await wrap { try await core.list(agent: agent) })
    }

    /// Only the fields in `changes` change; a new revision credited to `actor`. A schedule, window or
    /// resume change reschedules the next slot; the agent cannot change.
    public func update(_ id: String, _ changes: RoutineChanges, actor: String) async throws -> Routine {
        let text = try await wrap { try await core.update(id: id, patchJson: try fields(changes), actor: actor) }
        return try decode(Routine.self, text)
    }

    /// Removes the routine and its run history; its revisions stay. A run in progress finishes.
    public func delete(_ id: String, actor: String) async throws {
        try await wrap { try await core.delete(id: id, actor: actor) }
    }

    /// The runs of a routine (or of all), latest first.
    public func runs(routineId: String? = nil, limit: Int = 100) async throws -> [RunRecord] {
        try decode([RunRecord].self, try await wrap { try await core.runs(routineId: routineId, limit: Int64(limit)) })
    }

    /// One run's record, or nil.
    public func run(_ runId: String) async throws -> RunRecord? {
        try decode(RunRecord?.self, try await wrap { try await core.run(runId: runId) })
    }

    /// The slots of a routine (or of all) that were not run.
    public func skipped(routineId: String? = nil) async throws -> [SkippedSlots] {
        try decode([SkippedSlots].self, try await wrap { try await core.skipped(routineId: routineId) })
    }
}

/// What an agent factory knows of the run: the routine (its `model` override included), the run, and the
/// run's tools (`report_outcome`, `list_my_routines`, `list_my_outcomes`, and the ledger's with a
/// ledger), given to the agent as `Agent(model:…, ledger: ctx.tools)`.
public struct RunContext: @unchecked Sendable {
    public let routine: Routine
    public let run: RunRecord
    public let tools: LedgerTools
}

/// Makes an agent for one run of a routine.
public typealias AgentFactory = @Sendable (RunContext) async throws -> Agent

private final class FactoryAdapter: RoutineAgentFactory, @unchecked Sendable {
    let agents: [String: AgentFactory]

    init(_ agents: [String: AgentFactory]) { self.agents = agents }

    private struct Context: Decodable {
        let agent: String
        let routine: Routine
        let run: RunRecord
    }

    func make(contextJson: String, tools: CoreLedgerTools) async throws -> CoreAgent {
        do {
            let ctx = try decode(Context.self, contextJson)
            guard let make = agents[ctx.agent] else {
                throw HostToolError.Failed(message: "no factory for agent '\(ctx.agent)'")
            }
            return try await make(RunContext(routine: ctx.routine, run: ctx.run, tools: LedgerTools(core: tools))).core
        } catch let e as HostToolError {
            throw e
        } catch {
            throw HostToolError.Failed(message: "\(error)")
        }
    }
}

/// Fires the due slots of the routines in a store as session runs; any number of runners, in any number
/// of processes, may share one store.
public final class Runner: @unchecked Sendable {
    let core: CoreRunner

    /// `agents` maps the routines' agent names to factories; `leaseMs` is how long a run of a runner that
    /// died stays held before it is marked lost; `pollMs` how often `runForever` ticks. With `ledger`,
    /// every run also gets the work ledger's tools and a `report_backlog` starts a drain.
    public init(routines: Routines, sessions: Sessions, agents: [String: AgentFactory], leaseMs: Int = 60_000,
                pollMs: Int = 1_000, id: String? = nil, ledger: Ledger? = nil) throws {
        for (field, value) in [("leaseMs", leaseMs), ("pollMs", pollMs)] where value < 0 {
            throw RoutineError.invalid(field: field, message: "invalid \(field): must be milliseconds >= 0, got \(value)")
        }
        do {
            core = try CoreRunner(
                routines: routines.core, sessions: sessions.core, agents: Array(agents.keys),
                factory: FactoryAdapter(agents), leaseMs: UInt64(leaseMs), pollMs: UInt64(pollMs), id: id,
                ledger: ledger?.core)
        } catch {
            throw RoutineError(error)
        }
    }

    /// The runner's id in run records.
    public var id: String {
        get throws { do { return try core.id() } catch { throw RoutineError(error) } }
    }

    /// One pass at `now` (ms; the clock when nil): renews this runner's leases, marks lost the runs whose
    /// lease ran out, claims the due slots and starts their runs in the background, and finishes parked
    /// runs a resume ended.
    public func tick(now: Int64? = nil) async throws -> TickReport {
        try decode(TickReport.self, try await wrap { try await core.tick(now: now) })
    }

    /// Waits until every run this runner started has ended (finished, parked or failed).
    public func waitIdle() async throws {
        try await wrap { try await core.waitIdle() }
    }

    /// Ticks until the task awaiting it is cancelled; runs in progress go on.
    public func runForever() async throws {
        try await wrap { try await core.runForever() }
    }
}
