// Permissions in the Swift facade: the policy, the approval handler (a protocol, or a closure), a tool's
// level declarations, and the names of levels and statuses. It only translates into the generated layer
// (`PolicySettings`, `HostApprovalHandler`); every rule (levels, filters, which call is asked, what an
// answer means) lives in the Rust core.
//
// `Level`, `Network`, `ToolStatus`, `ToolListing`, `ApprovalRequest`, `ApprovalReason` and
// `ApprovalDecision` are the generated types themselves (ambit_swift.swift), extended here.

import Foundation

/// Answers approval requests while the run waits: `.approve`, `.deny(reason:)` (the model sees the
/// reason) or `.revise(argumentsJson:)` (the tool runs with the replacement, read by the argument rule
/// again). A thrown error denies the call with the error's message. Approval never widens reach: an
/// approved call runs at the session's level.
public protocol ApprovalHandler: Sendable {
    func decide(_ request: ApprovalRequest) async throws -> ApprovalDecision
}

/// An approval handler from a closure, sync or async: `ApprovalClosure { request in .approve }`.
public struct ApprovalClosure: ApprovalHandler {
    private let body: @Sendable (ApprovalRequest) async throws -> ApprovalDecision

    public init(_ body: @escaping @Sendable (ApprovalRequest) async throws -> ApprovalDecision) {
        self.body = body
    }

    public func decide(_ request: ApprovalRequest) async throws -> ApprovalDecision {
        try await body(request)
    }
}

/// What a session may do: its level, approval handler, tool filters, scope and network. Without a
/// policy an agent runs at `.unrestricted` with approvals off.
///
/// ```swift
/// let policy = Policy(level: .read, approvals: { request in
///     request.tool == "send_email" ? .approve : .deny(reason: "not today")
/// })
/// let agent = try Agent(model: model, tools: [SendEmail()], policy: policy, builtins: ["file_read"])
/// ```
public struct Policy: Sendable {
    /// `.none < .read < .workspace < .unrestricted`. At `.none` the model is offered no tools.
    public var level: Level
    /// With a handler, calls above the level (and every call of a `requiresApproval` tool) go to it.
    public var approvals: (any ApprovalHandler)?
    /// Only these tools exist for the agent (must not be empty); nil: every tool.
    public var allowTools: [String]?
    /// These tools never exist for the agent; a block wins over an allow.
    public var blockTools: [String]
    /// The level a tool requires, by tool name, replacing its declared one.
    public var levelOverrides: [String: Level]
    /// nil: the process's current directory. Directories must exist.
    public var workingDirectory: String?
    /// More roots where `.workspace` may write.
    public var workspaceDirectories: [String]
    /// More directories that may be read when reads are confined.
    public var readableDirectories: [String]
    /// Reads only inside the working, workspace and readable directories (and the system's).
    public var confineReads: Bool
    /// What the shell and web_fetch may reach.
    public var network: Network
    /// Addresses or CIDR ranges of this machine or link-local (169.254.0.0/16, fe80::/10: cloud metadata
    /// services) that web_fetch may still reach under `network: .remote`. An entry that is not an
    /// address or range throws `AmbitError.config` naming it when the agent is built.
    public var allowLocalAddresses: [String]

    public init(
        level: Level = .unrestricted,
        approvals: (any ApprovalHandler)? = nil,
        allowTools: [String]? = nil,
        blockTools: [String] = [],
        levelOverrides: [String: Level] = [:],
        workingDirectory: String? = nil,
        workspaceDirectories: [String] = [],
        readableDirectories: [String] = [],
        confineReads: Bool = false,
        network: Network = .unrestricted,
        allowLocalAddresses: [String] = []
    ) {
        self.level = level
        self.approvals = approvals
        self.allowTools = allowTools
        self.blockTools = blockTools
        self.levelOverrides = levelOverrides
        self.workingDirectory = workingDirectory
        self.workspaceDirectories = workspaceDirectories
        self.readableDirectories = readableDirectories
        self.confineReads = confineReads
        self.network = network
        self.allowLocalAddresses = allowLocalAddresses
    }

    /// A policy whose approval handler is a closure (sync or async).
    public init(
        level: Level = .unrestricted,
        approvals: @escaping @Sendable (ApprovalRequest) async throws -> ApprovalDecision,
        allowTools: [String]? = nil,
        blockTools: [String] = [],
        levelOverrides: [String: Level] = [:],
        workingDirectory: String? = nil,
        workspaceDirectories: [String] = [],
        readableDirectories: [String] = [],
        confineReads: Bool = false,
        network: Network = .unrestricted,
        allowLocalAddresses: [String] = []
    ) {
        self.init(
            level: level, approvals: ApprovalClosure(approvals), allowTools: allowTools, blockTools: blockTools,
            levelOverrides: levelOverrides, workingDirectory: workingDirectory,
            workspaceDirectories: workspaceDirectories, readableDirectories: readableDirectories,
            confineReads: confineReads, network: network, allowLocalAddresses: allowLocalAddresses)
    }

    /// Reads a policy from JSON, the form every language shares (snake_case: `level`, `allow_tools`,
    /// `block_tools`, `level_overrides`, `working_directory`, `workspace_directories`,
    /// `readable_directories`, `confine_reads`, `network`, `allow_local_addresses`). An unknown field or
    /// value throws `AmbitError.config` naming it.
    public init(json: String, approvals: (any ApprovalHandler)? = nil) throws {
        let s: PolicySettings
        do {
            s = try policyFromJson(json: json)
        } catch {
            throw AmbitError(error)
        }
        self.init(
            level: s.level, approvals: approvals, allowTools: s.allowTools, blockTools: s.blockTools,
            levelOverrides: s.levelOverrides, workingDirectory: s.workingDirectory,
            workspaceDirectories: s.workspaceDirectories, readableDirectories: s.readableDirectories,
            confineReads: s.confineReads, network: s.network, allowLocalAddresses: s.allowLocalAddresses)
    }

    /// The generated record the core reads.
    var settings: PolicySettings {
        PolicySettings(
            level: level,
            approvals: approvals.map(ApprovalAdapter.init),
            allowTools: allowTools,
            blockTools: blockTools,
            levelOverrides: levelOverrides,
            workingDirectory: workingDirectory,
            workspaceDirectories: workspaceDirectories,
            readableDirectories: readableDirectories,
            confineReads: confineReads,
            network: network,
            allowLocalAddresses: allowLocalAddresses
        )
    }
}

/// The names of the built-in tools (`file_read`, `file_find`, `file_search`, `file_edit`, `file_write`,
/// `web_fetch`, `shell_execute`), for `Agent(builtins:)`. Throws `AmbitError.internal` only on a bug in
/// ambit (a panic in the core, caught).
public var builtinToolNames: [String] {
    get throws {
        do { return try builtinNames() } catch { throw AmbitError(error) }
    }
}

extension AmbitTool {
    /// Undeclared: `.unrestricted` (the SDK cannot know what a host function does).
    public var level: Level { .unrestricted }
    /// Every call goes to the approval handler, whatever the level. Default false.
    public var requiresApproval: Bool { false }
    /// String arguments whose blank value is itself the value (kept, not read as left out). Default none.
    public var allowBlank: [String] { [] }
    /// Running a call twice has the effect of running it once. Default false.
    public var idempotent: Bool { false }
}

extension Level: CustomStringConvertible, Comparable {
    /// Reads a level by the core's name (`none`, `read`, `workspace`, `unrestricted`); anything else
    /// throws `AmbitError.config` naming it.
    public init(_ name: String) throws {
        do {
            self = try parseLevel(name: name)
        } catch {
            throw AmbitError(error)
        }
    }

    /// The core's name of the level.
    public var description: String {
        switch self {
        case .none: return "none"
        case .read: return "read"
        case .workspace: return "workspace"
        case .unrestricted: return "unrestricted"
        }
    }

    private var rank: Int {
        switch self {
        case .none: return 0
        case .read: return 1
        case .workspace: return 2
        case .unrestricted: return 3
        }
    }

    public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
}

extension Network: CustomStringConvertible {
    /// The core's name of the setting.
    public var description: String {
        switch self {
        case .none: return "none"
        case .remote: return "remote"
        case .unrestricted: return "unrestricted"
        }
    }
}

extension ToolStatus: CustomStringConvertible {
    /// The core's name of the status: `offered`, `blocked`, `above_level`, `deferred`, `hidden` or
    /// `no_network`.
    public var description: String {
        switch self {
        case .offered: return "offered"
        case .blocked: return "blocked"
        case .aboveLevel: return "above_level"
        case .deferred: return "deferred"
        case .hidden: return "hidden"
        case .noNetwork: return "no_network"
        }
    }
}

extension ApprovalReason: CustomStringConvertible {
    /// The core's name of the reason: `above_level` or `requires_approval`.
    public var description: String {
        switch self {
        case .aboveLevel: return "above_level"
        case .requiresApproval: return "requires_approval"
        }
    }
}

extension ApprovalRequest {
    /// The arguments, decoded.
    public var arguments: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(argumentsJson.utf8))) as? [String: Any] ?? [:]
    }
}

extension ApprovalDecision {
    /// `.revise` with the replacement arguments as a dictionary; throws `AmbitError.config` when they
    /// are not JSON.
    public static func revised(_ arguments: [String: Any]) throws -> ApprovalDecision {
        guard JSONSerialization.isValidJSONObject(arguments) else {
            throw AmbitError.config(message: "the revised arguments are not JSON: \(arguments)")
        }
        let data = try JSONSerialization.data(withJSONObject: arguments, options: [.sortedKeys])
        return .revise(argumentsJson: String(decoding: data, as: UTF8.self))
    }
}

/// Adapts an `ApprovalHandler` to the generated `HostApprovalHandler` the core calls.
final class ApprovalAdapter: HostApprovalHandler {
    private let handler: any ApprovalHandler

    init(_ handler: any ApprovalHandler) { self.handler = handler }

    func decide(request: ApprovalRequest) async throws -> ApprovalDecision {
        do {
            return try await handler.decide(request)
        } catch {
            throw HostToolError.Failed(message: ToolAdapter.message(of: error))
        }
    }
}
