// MCP servers and deferral (SPEC §3–4) as plain data: the facade writes the core's `ToolingOptions`
// JSON (`{"mcp_servers": [...], "deferral": {...}}`), which the core checks and refuses by name. Every
// rule lives in the core.

import Foundation

/// How a tool that may be deferred ships.
public enum DeferralSetting: String, Sendable, Encodable {
    /// Listed in the catalog; the schema is sent once the model loads it (the default for MCP tools).
    case deferred
    /// Declared from the first request.
    case eager
    /// Not registered at all: not in the catalog or the request.
    case hidden
}

/// How a load reaches the provider.
public enum LoadStrategy: String, Sendable, Encodable {
    /// A loaded schema joins the tools array.
    case append
    /// Every schema from the first request: nothing is left deferred.
    case eager
    /// The provider's own tool search and deferred loading where the model has it (Anthropic Messages
    /// on Claude Opus/Sonnet 4.5+, OpenAI Responses on GPT-5.4+), else as `append`. The default.
    case native
}

/// The MCP protocol revision a client speaks.
public enum McpProtocol: String, Sendable, Encodable {
    /// 2025-11-25, with `initialize` (the default).
    case initialize
    /// 2026-07-28, stateless: `server/discover`.
    case stateless
    /// Probe with `server/discover`, fall back to `initialize`.
    case auto
}

/// How to reach an MCP server.
public enum McpTransport: Sendable, Equatable {
    /// A child process speaking on its stdin and stdout.
    case stdio(command: String, args: [String], env: [String: String], cwd: String?)
    /// Streamable HTTP at this URL.
    case http(url: String)
}

/// One MCP server; its tools are named `mcp__<name>__<tool>`.
public struct McpServer: Sendable, Equatable {
    public var name: String
    public var transport: McpTransport
    public var `protocol`: McpProtocol
    /// Believe the server's annotations (`readOnlyHint` gives level `read`).
    public var trusted: Bool
    /// The level of a tool, by the server's name for it; wins over annotations. Others: `unrestricted`.
    public var levels: [String: Level]
    /// This server's setting; `nil` follows the agent's `Deferral`.
    public var deferral: DeferralSetting?
    /// Tools (the server's names) that ship their schemas from the first request under every setting.
    public var eagerLoadTools: [String]
    /// HTTP only: headers sent as given with every request (their values never appear in an error).
    public var headers: [String: String]
    /// HTTP only: headers whose value is the agent's credential of that alias (`Agent(credentials:)`).
    public var credentialHeaders: [String: String]
    /// HTTP only: the alias of a credential sent as `Authorization: Bearer <value>`.
    public var bearer: String?
    /// Stdio only: environment variables whose value is the agent's credential of that alias.
    public var credentialEnv: [String: String]

    public init(
        name: String, transport: McpTransport, protocol: McpProtocol = .initialize, trusted: Bool = false,
        levels: [String: Level] = [:], deferral: DeferralSetting? = nil, eagerLoadTools: [String] = [],
        headers: [String: String] = [:], credentialHeaders: [String: String] = [:], bearer: String? = nil,
        credentialEnv: [String: String] = [:]
    ) {
        self.name = name
        self.transport = transport
        self.protocol = `protocol`
        self.trusted = trusted
        self.levels = levels
        self.deferral = deferral
        self.eagerLoadTools = eagerLoadTools
        self.headers = headers
        self.credentialHeaders = credentialHeaders
        self.bearer = bearer
        self.credentialEnv = credentialEnv
    }

    /// A server run as a child process; `credentialEnv` maps environment variables to credential aliases.
    public static func stdio(
        _ name: String, command: String, args: [String] = [], env: [String: String] = [:], cwd: String? = nil,
        trusted: Bool = false, levels: [String: Level] = [:], deferral: DeferralSetting? = nil,
        eagerLoadTools: [String] = [], credentialEnv: [String: String] = [:]
    ) -> McpServer {
        McpServer(
            name: name, transport: .stdio(command: command, args: args, env: env, cwd: cwd), trusted: trusted,
            levels: levels, deferral: deferral, eagerLoadTools: eagerLoadTools, credentialEnv: credentialEnv)
    }

    /// A server reached over streamable HTTP; `bearer` and `credentialHeaders` name credential aliases
    /// (the values reach the server, never the model), `headers` are sent as given.
    public static func http(
        _ name: String, url: String, trusted: Bool = false, levels: [String: Level] = [:],
        deferral: DeferralSetting? = nil, eagerLoadTools: [String] = [], headers: [String: String] = [:],
        credentialHeaders: [String: String] = [:], bearer: String? = nil
    ) -> McpServer {
        McpServer(
            name: name, transport: .http(url: url), trusted: trusted, levels: levels, deferral: deferral,
            eagerLoadTools: eagerLoadTools, headers: headers, credentialHeaders: credentialHeaders, bearer: bearer)
    }

    var json: [String: Any] {
        var transport: [String: Any]
        switch self.transport {
        case let .stdio(command, args, env, cwd):
            transport = ["type": "stdio", "command": command, "args": args, "env": env]
            if let cwd { transport["cwd"] = cwd }
        case let .http(url):
            transport = ["type": "http", "url": url]
        }
        var out: [String: Any] = [
            "name": name, "transport": transport, "protocol": self.protocol.rawValue, "trusted": trusted,
            "levels": levels.mapValues { $0.description }, "eager_load_tools": eagerLoadTools,
        ]
        if let deferral { out["deferral"] = deferral.rawValue }
        if !headers.isEmpty { out["headers"] = headers }
        if !credentialHeaders.isEmpty { out["credential_headers"] = credentialHeaders }
        if let bearer { out["bearer"] = bearer }
        if !credentialEnv.isEmpty { out["credential_env"] = credentialEnv }
        return out
    }
}

/// Which tools wait in the catalog until the model loads them.
public struct Deferral: Sendable, Equatable {
    /// The install-wide setting: servers without their own, and `deferrableTools`, follow it.
    public var setting: DeferralSetting
    public var strategy: LoadStrategy
    /// Host tools and built-ins that may be deferred (all others are eager).
    public var deferrableTools: [String]

    public init(setting: DeferralSetting = .deferred, strategy: LoadStrategy = .native, deferrableTools: [String] = []) {
        self.setting = setting
        self.strategy = strategy
        self.deferrableTools = deferrableTools
    }

    var json: [String: Any] {
        ["setting": setting.rawValue, "strategy": strategy.rawValue, "deferrable_tools": deferrableTools]
    }
}

/// The core's `ToolingOptions` as JSON text, or nil when there is nothing to configure. Settings that
/// cannot be written as JSON are `AmbitError.config`, never silently dropped.
func toolingJSON(_ servers: [McpServer], _ deferral: Deferral?) throws -> String? {
    if servers.isEmpty && deferral == nil { return nil }
    var out: [String: Any] = ["mcp_servers": servers.map(\.json)]
    if let deferral { out["deferral"] = deferral.json }
    do {
        let data = try JSONSerialization.data(withJSONObject: out, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    } catch {
        throw AmbitError.config(message: "invalid configuration: the MCP servers and deferral settings are not JSON: \(error)")
    }
}
