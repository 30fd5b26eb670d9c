// The credential broker in the Swift face of ambit (SPEC §15): credentials registered by alias and
// delivered to the tools that declare them, never to the model. Every rule (which tool gets what, the
// shell's environment, web_fetch's hosts, the redactor) lives in the Rust core; this file only gathers
// the registrations as data and hands the callbacks over.

import Foundation

/// Credentials by alias, for `Agent(..., credentials:)`:
///
/// ```swift
/// let creds = Credentials()
///     .value("github", token)
///     .env("openai", "OPENAI_API_KEY")
///     .callback("vault") { _ in try await fetchToken() }
///     .shellEnv("GITHUB_TOKEN", alias: "github")
///     .webFetch(host: "api.github.com", alias: "github")
/// ```
///
/// A tool declares the aliases it needs (`let credentials = ["github"]`) and reads them from its context
/// (`try context.credential("github")`). Every tool result and error passes the core's redactor: the
/// model sees `[credential:github]`.
public struct Credentials: Sendable {
    var sources: [String: [String: AnyCodableValue]] = [:]
    var shell: [String: String] = [:]
    var web: [[String: String]] = []
    var callbacks: [String: @Sendable (String) async throws -> String] = [:]

    public init() {}

    /// A credential with a fixed value (at least 8 bytes).
    public func value(_ alias: String, _ value: String) -> Credentials {
        var c = self
        c.sources[alias] = ["value": .string(value)]
        return c
    }

    /// A credential read from the environment variable `name` each time it is needed.
    public func env(_ alias: String, _ name: String) -> Credentials {
        var c = self
        c.sources[alias] = ["env": .string(name)]
        return c
    }

    /// A credential the host produces on demand, each time a tool needs it.
    public func callback(_ alias: String, _ fn: @escaping @Sendable (String) async throws -> String) -> Credentials {
        var c = self
        c.sources[alias] = ["callback": .bool(true)]
        c.callbacks[alias] = fn
        return c
    }

    /// `shell_execute` runs with the environment variable `name` set to the credential `alias`.
    public func shellEnv(_ name: String, alias: String) -> Credentials {
        var c = self
        c.shell[name] = alias
        return c
    }

    /// `web_fetch` adds `header: <prefix><value>` to requests for `host` (default `Authorization: Bearer`).
    public func webFetch(host: String, alias: String, header: String = "authorization", prefix: String? = nil)
        -> Credentials
    {
        var c = self
        var rule = ["host": host, "alias": alias, "header": header]
        if let prefix { rule["prefix"] = prefix }
        c.web.append(rule)
        return c
    }

    var callbackAliases: [String] { callbacks.keys.sorted() }

    /// The core's `CredentialsConfig` as JSON text.
    func json() throws -> String {
        var credentials: [String: Any] = [:]
        for (alias, source) in sources {
            credentials[alias] = source.mapValues { $0.any }
        }
        let object: [String: Any] = ["credentials": credentials, "shell_env": shell, "web_fetch": web]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

/// A JSON scalar a credential source holds.
enum AnyCodableValue: Sendable {
    case string(String)
    case bool(Bool)

    var any: Any {
        switch self {
        case .string(let s): return s
        case .bool(let b): return b
        }
    }
}
