// Memory in Swift (SPEC §14): `try await Memory.open("sqlite:///path")` or a `postgres://` URL, one
// namespace per agent name. It only translates: `MemoryCoreError` into `MemoryError` (with the core's
// `code`), defaults into the core's arguments. Every rule (bounds, ranking, keys) lives in the Rust core.
// Times are milliseconds since the Unix epoch.

import Foundation

/// A memory call refused or failed. `code` is the same in every language.
public enum MemoryError: Error, Equatable, LocalizedError, CustomStringConvertible {
    /// An argument out of bounds or malformed; `field` names it and the message gives the limit.
    case invalidArgument(field: String, message: String)
    /// No memory with that id or key for this agent.
    case notFound(message: String)
    /// A write through read-only access (a sub-agent's grant).
    case readOnly(message: String)
    /// The store failed.
    case store(message: String)
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down.
    case `internal`(message: String)

    public var code: String {
        switch self {
        case .invalidArgument: return "memory_invalid_argument"
        case .notFound: return "memory_not_found"
        case .readOnly: return "memory_read_only"
        case .store: return "memory_store"
        case .internal: return "internal"
        }
    }

    public var message: String {
        switch self {
        case .invalidArgument(_, let m), .notFound(let m), .readOnly(let m), .store(let m), .internal(let m):
            return m
        }
    }

    public var errorDescription: String? { message }
    public var description: String { "\(code): \(message)" }

    init(_ error: Error) {
        switch error {
        case let e as MemoryError: self = e
        case MemoryCoreError.InvalidArgument(let f, let m): self = .invalidArgument(field: f, message: m)
        case MemoryCoreError.NotFound(let m): self = .notFound(message: m)
        case MemoryCoreError.ReadOnly(let m): self = .readOnly(message: m)
        case MemoryCoreError.Store(let m): self = .store(message: m)
        case MemoryCoreError.Internal(let m): self = .internal(message: m)
        // Anything else the generated layer throws is a bug in ambit, never a store failure.
        default: self = .internal(message: AmbitError(error).message)
        }
    }
}

/// What a memory is.
public enum MemoryKind: String, Sendable, CaseIterable {
    case fact, preference, lesson, instruction
}

/// A memory store on SQLite or PostgreSQL, one namespace per agent name.
public final class Memory: @unchecked Sendable {
    let core: CoreMemory

    private init(core: CoreMemory) { self.core = core }

    /// Opens the store, applying its migrations.
    public static func open(_ url: String) async throws -> Memory {
        do {
            return Memory(core: try await CoreMemory.open(url: url))
        } catch {
            throw MemoryError(error)
        }
    }

    /// Saves a memory in `agent`'s namespace; with a `key` already saved, updates that memory in place
    /// (arguments left `nil` keep their values).
    @discardableResult
    public func remember(
        _ agent: String, body: String? = nil, title: String? = nil, kind: MemoryKind? = nil, tags: [String]? = nil,
        salience: Int? = nil, pinned: Bool? = nil, key: String? = nil, subject: String? = nil
    ) async throws -> SavedMemory {
        let input = MemoryInput(
            body: body, title: title, kind: kind?.rawValue, tags: tags, salience: salience.map { Int64($0) },
            pinned: pinned, key: key, subject: subject)
        do {
            return try await core.remember(agent: agent, memory: input)
        } catch {
            throw MemoryError(error)
        }
    }

    /// With a `query`, ranked by relevance over title, body and tags; without, pinned then highest
    /// salience. `tags` keeps memories carrying all of them; `limit` 1 to 50.
    public func recall(
        _ agent: String, query: String? = nil, tags: [String] = [], kind: MemoryKind? = nil, subjects: [String] = [],
        limit: Int = 10
    ) async throws -> [MemoryItem] {
        do {
            return try await core.recall(
                agent: agent, query: query, tags: tags, kindName: kind?.rawValue, subjects: subjects,
                limit: UInt32(clamping: max(limit, 0)))
        } catch {
            throw MemoryError(error)
        }
    }

    /// Forgets one memory by `id` or `key`; whether it existed.
    @discardableResult
    public func forget(_ agent: String, id: Int64? = nil, key: String? = nil) async throws -> Bool {
        do {
            return try await core.forget(agent: agent, id: id, key: key)
        } catch {
            throw MemoryError(error)
        }
    }

    /// Every memory of `agent`, oldest first.
    public func list(_ agent: String) async throws -> [MemoryItem] {
        do {
            return try await core.list(agent: agent)
        } catch {
            throw MemoryError(error)
        }
    }

    /// The memories of `agent` (or of every agent) as JSON: `{"version": 1, "memories": [...]}`.
    public func export(_ agent: String? = nil) async throws -> String {
        do {
            return try await core.export(agent: agent)
        } catch {
            throw MemoryError(error)
        }
    }
}
