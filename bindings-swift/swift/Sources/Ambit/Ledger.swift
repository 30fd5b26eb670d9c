// The work ledger in Swift: `try await Ledger.open("sqlite:///path")` or a `postgres://` URL. It only
// translates: `LedgerCoreError` into `LedgerError` (with the core's `code`), defaults into the core's
// arguments. Every rule (claims, fencing, cooldowns) lives in the Rust core. Times are milliseconds
// since the Unix epoch.

import Foundation

/// A ledger call refused or failed; a refused batch wrote nothing. `code` is the same in every language.
public enum LedgerError: Error, Equatable, LocalizedError, CustomStringConvertible {
    /// An unknown outcome, a missing subject_key or the same subject twice.
    case invalidBatch(message: String)
    /// A record for a grant that another run has since reclaimed.
    case staleToken(subjectKey: String, message: String)
    /// A record for a subject this run never claimed (or already recorded).
    case notClaimed(subjectKey: String, message: String)
    /// A routine claiming outside the scope its first claim pinned.
    case scopePinned(routineId: String, pinnedScope: String, scope: String, message: String)
    /// An argument the ledger cannot use (an empty scope, a bad URL).
    case invalidArgument(message: String)
    /// The store failed.
    case store(message: String)
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down.
    case `internal`(message: String)

    public var code: String {
        switch self {
        case .invalidBatch: return "ledger_invalid_batch"
        case .staleToken: return "ledger_stale_token"
        case .notClaimed: return "ledger_not_claimed"
        case .scopePinned: return "ledger_scope_pinned"
        case .invalidArgument: return "ledger_invalid_argument"
        case .store: return "ledger_store"
        case .internal: return "internal"
        }
    }

    public var message: String {
        switch self {
        case .invalidBatch(let m), .staleToken(_, let m), .notClaimed(_, let m), .scopePinned(_, _, _, let m),
             .invalidArgument(let m), .store(let m), .internal(let m):
            return m
        }
    }

    public var errorDescription: String? { message }
    public var description: String { "\(code): \(message)" }

    init(_ error: Error) {
        switch error {
        case let e as LedgerError: self = e
        case LedgerCoreError.InvalidBatch(let m): self = .invalidBatch(message: m)
        case LedgerCoreError.StaleToken(let k, let m): self = .staleToken(subjectKey: k, message: m)
        case LedgerCoreError.NotClaimed(let k, let m): self = .notClaimed(subjectKey: k, message: m)
        case LedgerCoreError.ScopePinned(let r, let p, let s, let m):
            self = .scopePinned(routineId: r, pinnedScope: p, scope: s, message: m)
        case LedgerCoreError.InvalidArgument(let m): self = .invalidArgument(message: m)
        case LedgerCoreError.Store(let m): self = .store(message: m)
        case LedgerCoreError.Internal(let m): self = .internal(message: m)
        // Anything else the generated layer throws is a bug in ambit, never a store failure.
        default: self = .internal(message: AmbitError(error).message)
        }
    }
}

/// What a run reports for a subject it claimed.
public enum WorkOutcome: String, Sendable {
    case productive, empty, failed, released
}

extension LabelledCandidate {
    public var granted: Bool { grantReason != nil }
}

/// The work ledger on SQLite or PostgreSQL.
public final class Ledger: @unchecked Sendable {
    let core: CoreLedger

    /// Wraps the core's ledger (`open`, or a test hook such as `testingOpenLedger`).
    init(core: CoreLedger) { self.core = core }

    /// Opens the ledger, applying its migrations; `fast` trades durability for speed.
    public static func open(_ url: String, fast: Bool = false) async throws -> Ledger {
        do {
            return Ledger(core: try await CoreLedger.open(url: url, fast: fast))
        } catch {
            throw LedgerError(error)
        }
    }

    /// Labels every candidate granted or skipped, granting at most `limit`, in one atomic step.
    public func claim(_ scope: String, _ candidates: [String], fingerprints: [String: String] = [:], limit: Int,
                      leaseMs: Int64 = 3_600_000, runId: String? = nil, routineId: String? = nil) async throws
        -> [LabelledCandidate]
    {
        let items = candidates.map { WorkCandidate(subjectKey: $0, fingerprint: fingerprints[$0]) }
        do {
            return try await core.claim(scope: scope, candidates: items, limit: UInt32(max(0, limit)), leaseMs: leaseMs,
                                        runId: runId, routineId: routineId)
        } catch {
            throw LedgerError(error)
        }
    }

    /// Records a batch: the whole batch or nothing. `outcome` strings other than the four are rejected.
    public func record(_ scope: String, _ records: [WorkRecord], runId: String? = nil) async throws -> [RecordedWork] {
        do {
            return try await core.record(scope: scope, records: records, runId: runId)
        } catch {
            throw LedgerError(error)
        }
    }

    /// Ledger rows, soonest eligible first; `state` is "all", "eligible" or "suppressed".
    public func list(scope: String? = nil, state: String = "all", routineId: String? = nil) async throws -> [LedgerEntry] {
        do {
            return try await core.list(scope: scope, state: state, routineId: routineId)
        } catch {
            throw LedgerError(error)
        }
    }
}

extension RoutineLimits {
    /// A routine's limits: `parallelLimit` runs at once, at most `dailyCap` a day; `running` and
    /// `startedToday` count the reporting run.
    public init(parallelLimit: UInt32 = 1, dailyCap: UInt32? = nil) {
        self.init(parallelLimit: parallelLimit, dailyCap: dailyCap, running: 1, startedToday: 0)
    }
}

/// The work ledger's four agent tools (`claim_work`, `record_work`, `list_work_ledger`,
/// `report_backlog`) bound to one run of a routine: `Agent(model: m, ledger: ledger.tools(...))`. The
/// scope, routine id, run id and claim tokens are filled in by the SDK, never by the model.
public struct LedgerTools: @unchecked Sendable {
    let core: CoreLedgerTools

    /// The tools' names, in registration order. Throws `AmbitError.internal` only on a bug in ambit (a
    /// panic in the core, caught).
    public var names: [String] {
        get throws {
            do { return try core.names() } catch { throw AmbitError(error) }
        }
    }
}

extension Ledger {
    /// Per scope, how many rows were last granted for each reason: a scope dominated by
    /// `fingerprintChanged` (`fingerprintsLookUnstable`) has unstable fingerprints.
    public func grantReasonCounts(_ scope: String) async throws -> GrantReasonCounts {
        do {
            return try await core.grantReasonCounts(scope: scope)
        } catch {
            throw LedgerError(error)
        }
    }

    /// Counts how many of `subjectKeys` are workable now in the routine's scope; `extraRuns` is
    /// `ceil(workable / batchSize)` capped by the routine's limits. The report is kept for the drain.
    public func reportBacklog(_ routineId: String, _ subjectKeys: [String], batchSize: Int,
                              limits: RoutineLimits = RoutineLimits(), runId: String? = nil) async throws
        -> BacklogReport
    {
        do {
            return try await core.reportBacklog(routineId: routineId, subjectKeys: subjectKeys,
                                                batchSize: Int64(batchSize), limits: limits,
                                                runId: runId)
        } catch {
            throw LedgerError(error)
        }
    }

    /// After a run of a draining routine finishes: `stop` (and why), or `startRuns` for the host to start.
    public func drainDecision(_ routineId: String, runId: String, limits: RoutineLimits = RoutineLimits())
        async throws -> DrainDecision
    {
        do {
            return try await core.drainDecision(routineId: routineId, runId: runId, limits: limits)
        } catch {
            throw LedgerError(error)
        }
    }

    /// The four agent tools bound to one run of a routine. `limit`: the most one `claim_work` grants;
    /// `limits`: the routine's, for `report_backlog`. Throws `LedgerError.internal` only on a bug in
    /// ambit (a panic in the core, caught).
    public func tools(scope: String, routineId: String? = nil, runId: String, limit: Int = 5,
                      leaseMs: Int64 = 3_600_000, limits: RoutineLimits = RoutineLimits()) throws -> LedgerTools
    {
        do {
            return LedgerTools(core: try core.toolsForRoutine(scope: scope, routineId: routineId, runId: runId,
                                                              limit: UInt32(clamping: max(limit, 1)),
                                                              leaseMs: leaseMs, limits: limits))
        } catch {
            throw LedgerError(error)
        }
    }
}

extension WorkRecord {
    public init(_ subjectKey: String, _ outcome: WorkOutcome, token: Int64? = nil) {
        self.init(subjectKey: subjectKey, outcome: outcome.rawValue, token: token, fingerprint: nil)
    }
}
