// Knowledge in Swift (SPEC §14): a directory of documents the agent lists (`knowledge_list`) and reads
// (`knowledge_read`: text inline up to a cap, a larger or binary document as a path under the agent's
// scope), and the host's publish: text only, at most 200 KB, overwrite off by default. It only
// translates: `KnowledgeCoreError` into `KnowledgeError` (with the core's `code`). Every rule lives in the
// Rust core.

import Foundation

/// A knowledge call refused or failed. `code` is the same in every language.
public enum KnowledgeError: Error, Equatable, LocalizedError, CustomStringConvertible {
    /// An argument out of bounds or malformed; `field` names it.
    case invalidArgument(field: String, message: String)
    /// A document of that name exists and `overwrite` was off.
    case exists(message: String)
    /// The directory could not be read or written.
    case io(message: String)
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down.
    case `internal`(message: String)

    public var code: String {
        switch self {
        case .invalidArgument: return "knowledge_invalid_argument"
        case .exists: return "knowledge_exists"
        case .io: return "knowledge_io"
        case .internal: return "internal"
        }
    }

    public var message: String {
        switch self {
        case .invalidArgument(_, let m), .exists(let m), .io(let m), .internal(let m): return m
        }
    }

    public var errorDescription: String? { message }
    public var description: String { "\(code): \(message)" }

    init(_ error: Error) {
        switch error {
        case let e as KnowledgeError: self = e
        case KnowledgeCoreError.InvalidArgument(let f, let m): self = .invalidArgument(field: f, message: m)
        case KnowledgeCoreError.Exists(let m): self = .exists(message: m)
        case KnowledgeCoreError.Io(let m): self = .io(message: m)
        case KnowledgeCoreError.Internal(let m): self = .internal(message: m)
        default: self = .internal(message: AmbitError(error).message)
        }
    }
}

/// A knowledge directory: given to an `Agent` (`knowledge:`) and published into by the host.
public struct Knowledge: Sendable, Equatable {
    /// Absolute, or relative to the policy's working directory (for `publish`, to the process's).
    public var dir: String
    /// The most bytes of text `knowledge_read` returns inline (default 64 KiB, at most 1 MiB).
    public var inlineMaxBytes: Int?

    public init(dir: String, inlineMaxBytes: Int? = nil) {
        self.dir = dir
        self.inlineMaxBytes = inlineMaxBytes
    }

    /// Publishes a text document (at most 200 KB) into the directory, made if missing; the agent sees it
    /// on its next request. An existing document is replaced only with `overwrite` (else `.exists`).
    @discardableResult
    public func publish(name: String, content: String, overwrite: Bool = false) throws -> PublishedDocument {
        do {
            return try knowledgePublish(dir: dir, name: name, content: content, overwrite: overwrite)
        } catch {
            throw KnowledgeError(error)
        }
    }

    func settings() throws -> KnowledgeSettings {
        var cap: UInt32? = nil
        if let inlineMaxBytes {
            guard let n = UInt32(exactly: inlineMaxBytes) else {
                throw AmbitError.config(
                    message: "invalid configuration: knowledge: inline_max_bytes must be from 1 to 1048576, got \(inlineMaxBytes)")
            }
            cap = n
        }
        return KnowledgeSettings(dir: dir, inlineMaxBytes: cap)
    }
}
