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

/// How an MCP OAuth client obtains its tokens.
public enum OAuthGrant: String, Sendable, Equatable {
    /// PKCE authorization code: the user consents through `onAuthorize`.
    case authorizationCode = "authorization_code"
    /// Client credentials (machine to machine): `clientId` and the credential alias `clientSecret`.
    case clientCredentials = "client_credentials"
}

/// Where an MCP server's OAuth tokens are kept (a keychain, a database); by key, the server's URL.
public protocol McpTokenStore: Sendable {
    func load(_ key: String) async throws -> String?
    func save(_ key: String, _ value: String) async throws
    func clear(_ key: String) async throws
}

/// OAuth 2.1 for an HTTP MCP server (the MCP authorization spec), run by the core: discovery, client
/// registration, PKCE, refresh, step-up. Tokens never reach the model (they are redacted like
/// credentials).
public struct McpOAuth: Sendable {
    public var grant: OAuthGrant
    /// Where the authorization server sends the user back (authorization code).
    public var redirectUri: String?
    /// The name registered through dynamic client registration.
    public var clientName: String?
    /// Scopes to ask for; empty: the server's.
    public var scopes: [String]
    /// A pre-registered client ID (no registration).
    public var clientId: String?
    /// The credential alias (`Agent(credentials:)`) of a pre-registered client's secret.
    public var clientSecret: String?
    /// An HTTPS URL of this client's metadata document, used as its client ID where supported.
    public var clientMetadataUrl: String?
    /// Tokens kept in this JSON file when no `tokenStore` is given (else: in memory).
    public var tokenFile: String?
    /// The trusted authorization server (its issuer URL): one the MCP server's metadata names
    /// differently is refused. Without it, a `clientSecret` goes only to the MCP server's own host.
    public var issuer: String?
    /// The most seconds to wait for the token store's refresh guard (another client refreshing); `nil`:
    /// 30. Past it the request fails with `refresh_lock_timeout`, naming the lock.
    public var refreshLockTimeout: Double? = nil
    /// The consent step: gets the authorization URL (open it in a browser) and answers the URL the
    /// authorization server redirected to (or its query string).
    public var onAuthorize: (@Sendable (String) async throws -> String)?
    /// Where tokens are kept.
    public var tokenStore: (any McpTokenStore)?

    public init(
        grant: OAuthGrant = .authorizationCode, redirectUri: String? = nil, clientName: String? = nil,
        scopes: [String] = [], clientId: String? = nil, clientSecret: String? = nil, clientMetadataUrl: String? = nil,
        tokenFile: String? = nil, issuer: String? = nil, tokenStore: (any McpTokenStore)? = nil,
        onAuthorize: (@Sendable (String) async throws -> String)? = nil
    ) {
        self.grant = grant
        self.redirectUri = redirectUri
        self.clientName = clientName
        self.scopes = scopes
        self.clientId = clientId
        self.clientSecret = clientSecret
        self.clientMetadataUrl = clientMetadataUrl
        self.tokenFile = tokenFile
        self.issuer = issuer
        self.tokenStore = tokenStore
        self.onAuthorize = onAuthorize
    }

    /// The authorization-code grant: where the user is sent back, and the consent step.
    public static func authorizationCode(
        redirectUri: String, clientName: String? = nil, scopes: [String] = [], clientId: String? = nil,
        clientSecret: String? = nil, issuer: String? = nil, tokenFile: String? = nil,
        tokenStore: (any McpTokenStore)? = nil, onAuthorize: @escaping @Sendable (String) async throws -> String
    ) -> McpOAuth {
        McpOAuth(
            redirectUri: redirectUri, clientName: clientName, scopes: scopes, clientId: clientId,
            clientSecret: clientSecret, tokenFile: tokenFile, issuer: issuer, tokenStore: tokenStore,
            onAuthorize: onAuthorize)
    }

    /// The client-credentials grant: a pre-registered client and the credential alias of its secret.
    public static func clientCredentials(
        clientId: String, clientSecret: String, scopes: [String] = [], issuer: String? = nil,
        tokenFile: String? = nil, tokenStore: (any McpTokenStore)? = nil
    ) -> McpOAuth {
        McpOAuth(
            grant: .clientCredentials, scopes: scopes, clientId: clientId, clientSecret: clientSecret,
            tokenFile: tokenFile, issuer: issuer, tokenStore: tokenStore)
    }

    var json: [String: Any] {
        var out: [String: Any] = ["grant": grant.rawValue, "scopes": scopes]
        let optional: [(String, String?)] = [
            ("redirect_uri", redirectUri), ("client_name", clientName), ("client_id", clientId),
            ("client_secret", clientSecret), ("client_metadata_url", clientMetadataUrl), ("token_file", tokenFile),
            ("issuer", issuer),
        ]
        for (key, value) in optional { if let value { out[key] = value } }
        if let refreshLockTimeout { out["refresh_lock_timeout_ms"] = max(1, Int((refreshLockTimeout * 1000).rounded())) }
        return out
    }
}

/// What an MCP server asks the user (elicitation).
public struct ElicitationRequest: Sendable {
    /// The server's configured name.
    public var server: String
    /// The text to show the user.
    public var message: String
    /// `form` (answer with an object matching `schemaJSON`) or `url` (the user visits `url`; only https,
    /// or http to loopback, reaches the handler).
    public var mode: String
    /// Form: the JSON schema of the answer, as JSON text.
    public var schemaJSON: String?
    /// URL mode: where the user goes.
    public var url: String?
}

/// The user's answer to an elicitation.
public enum ElicitationResponse: @unchecked Sendable {
    /// Accepted, with the content (form mode: an object matching the schema).
    case accept([String: Any]?)
    /// The user said no.
    case decline
    /// The user dismissed the request.
    case cancel

    var json: [String: Any] {
        switch self {
        case let .accept(content):
            var out: [String: Any] = ["action": "accept"]
            if let content { out["content"] = content }
            return out
        case .decline: return ["action": "decline"]
        case .cancel: return ["action": "cancel"]
        }
    }
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
    /// HTTP only: OAuth 2.1 for a server that answers 401.
    public var oauth: McpOAuth?
    /// The handler for the server's elicitation requests (declined when unset).
    public var onElicit: (@Sendable (ElicitationRequest) async throws -> ElicitationResponse)?

    /// Equal settings (the callbacks are not compared).
    public static func == (a: McpServer, b: McpServer) -> Bool {
        NSDictionary(dictionary: a.json).isEqual(to: b.json)
    }

    public init(
        name: String, transport: McpTransport, protocol: McpProtocol = .initialize, trusted: Bool = false,
        levels: [String: Level] = [:], deferral: DeferralSetting? = nil, eagerLoadTools: [String] = [],
        headers: [String: String] = [:], credentialHeaders: [String: String] = [:], bearer: String? = nil,
        credentialEnv: [String: String] = [:], oauth: McpOAuth? = nil,
        onElicit: (@Sendable (ElicitationRequest) async throws -> ElicitationResponse)? = nil
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
        self.oauth = oauth
        self.onElicit = onElicit
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
        credentialHeaders: [String: String] = [:], bearer: String? = nil, oauth: McpOAuth? = nil,
        onElicit: (@Sendable (ElicitationRequest) async throws -> ElicitationResponse)? = nil
    ) -> McpServer {
        McpServer(
            name: name, transport: .http(url: url), trusted: trusted, levels: levels, deferral: deferral,
            eagerLoadTools: eagerLoadTools, headers: headers, credentialHeaders: credentialHeaders, bearer: bearer,
            oauth: oauth, onElicit: onElicit)
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
        if let oauth { out["oauth"] = oauth.json }
        return out
    }

    /// The server's host callbacks for the core, each a function of JSON text.
    var hooks: [McpHook] {
        var out: [McpHook] = []
        if let f = oauth?.onAuthorize {
            out.append(McpHook(server: name, kind: "authorize", function: McpHookAdapter { url in try await f(url) }))
        }
        if let store = oauth?.tokenStore {
            out.append(McpHook(server: name, kind: "token_store", function: McpHookAdapter { text in
                let op = (try JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
                let key = op["key"] as? String ?? ""
                var answer: Any = NSNull()
                switch op["op"] as? String {
                case "load": answer = try await store.load(key) ?? NSNull()
                case "save": try await store.save(key, op["value"] as? String ?? "")
                default: try await store.clear(key)
                }
                return String(decoding: try JSONSerialization.data(withJSONObject: answer, options: [.fragmentsAllowed]), as: UTF8.self)
            }))
        }
        if let f = onElicit {
            out.append(McpHook(server: name, kind: "elicit", function: McpHookAdapter { text in
                let r = (try JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
                let schema = r["schema"].flatMap { $0 is NSNull ? nil : $0 }.flatMap {
                    try? JSONSerialization.data(withJSONObject: $0)
                }.map { String(decoding: $0, as: UTF8.self) }
                let request = ElicitationRequest(
                    server: r["server"] as? String ?? name, message: r["message"] as? String ?? "",
                    mode: r["mode"] as? String ?? "", schemaJSON: schema, url: r["url"] as? String)
                let response = try await f(request)
                return String(decoding: try JSONSerialization.data(withJSONObject: response.json), as: UTF8.self)
            }))
        }
        return out
    }
}

/// A host callback as the generated `HostTool` the core calls: JSON text in, JSON text out; an error
/// thrown reaches the core as the callback's failure.
final class McpHookAdapter: HostTool, @unchecked Sendable {
    private let function: @Sendable (String) async throws -> String

    init(_ function: @escaping @Sendable (String) async throws -> String) { self.function = function }

    func call(argumentsJson: String, task: UInt64, credentialsJson: String, context: UInt64) async throws -> String {
        do {
            return try await function(argumentsJson)
        } catch {
            throw HostToolError.Failed(message: ToolAdapter.message(of: error))
        }
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
