// MCP and deferral settings from Swift: what the core refuses, and how the listing shows deferral.
// (The scenario mcp_deferred_tools runs an agent against the real server-everything over HTTP.)

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

@testable import Ambit

@Suite struct McpTests {
    @Test func badServerNameIsAConfigError() {
        let error = configError { try Agent(model: model, mcpServers: [.stdio("no spaces", command: "node")]) }
        #expect(error?.code == "config")
        #expect(error?.message.contains("MCP server name 'no spaces'") == true, "\(String(describing: error))")
    }

    @Test func listingShowsDeferredAndHiddenHostTools() throws {
        func statuses(_ deferral: Deferral) throws -> [String] {
            let tools: [any AmbitTool] = [NamedTool(), NamedTool(name: "get_forecast")]
            return try Agent(model: model, tools: tools, deferral: deferral).listTools().map { "\($0.name):\($0.status)" }
        }
        #expect(try statuses(Deferral(deferrableTools: ["get_forecast"])) == ["get_weather:offered", "get_forecast:deferred"])
        #expect(
            try statuses(Deferral(setting: .hidden, deferrableTools: ["get_forecast"]))
                == ["get_weather:offered", "get_forecast:hidden"])
        #expect(
            try statuses(Deferral(strategy: .eager, deferrableTools: ["get_forecast"]))
                == ["get_weather:offered", "get_forecast:offered"])
    }

    @Test func serverSettingsReachTheCoreAsJSON() throws {
        let text = try #require(
            try toolingJSON(
                [.http("docs", url: "http://127.0.0.1:1/mcp", trusted: true, levels: ["search": .read], deferral: .eager)],
                Deferral(setting: .hidden)))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let server = try #require((json["mcp_servers"] as? [[String: Any]])?.first)
        #expect(server["deferral"] as? String == "eager")
        #expect((server["levels"] as? [String: String]) == ["search": "read"])
        #expect((json["deferral"] as? [String: Any])?["setting"] as? String == "hidden")
        #expect(try toolingJSON([], nil) == nil)
        // A server that cannot start is no configuration error: it is reported unavailable at run time.
        _ = try Agent(model: model, mcpServers: [.stdio("gone", command: "/nonexistent/server")])
    }

    /// Against the real server-everything (over streamable HTTP, started by scripts/test-swift.sh).
    @Test func refreshToolsListsARealServerBeforeARun() async throws {
        let agent = try Agent(
            model: model,
            mcpServers: [
                .http("everything", url: try Paths.mcpURL("everything"), levels: ["echo": .read], eagerLoadTools: ["get-sum"]),
                .stdio("gone", command: "/nonexistent/server"),
            ])
        // Before: only the seven resource and prompt meta-tools; the servers' tools once they are listed.
        #expect(try agent.listTools().count == 7)
        #expect(try !agent.listTools().contains { $0.name.hasPrefix("mcp__") })
        try await agent.refreshTools()
        let byName = Dictionary(uniqueKeysWithValues: try agent.listTools().map { ($0.name, $0) })
        #expect(byName["mcp__everything__echo"]?.status == .deferred)
        #expect(byName["mcp__everything__echo"]?.level == .read)
        #expect(byName["mcp__everything__get-sum"]?.status == .offered)
        #expect(byName["mcp__everything__get-sum"]?.level == .unrestricted)
        #expect(byName["mcp_prompt_get"]?.status == .deferred)
        #expect(!byName.keys.contains { $0.hasPrefix("mcp__gone__") })
    }
}

/// The MCP credential settings from Swift: a real HTTP server (tests/mcp/quoting_server.py, started by
/// scripts/test-swift.sh) gets the bearer, credential and static headers; a stdio server gets its
/// credential in its environment; the HTTP server's 401 quotes the headers and reaches the model redacted
/// (the quote's `[credential:github]` is the control that it reached the model at all).
@Suite struct McpCredentialTests {
    static let github = "ghp_SwiftMcpBearerToken0123456789"
    static let api = "api-key-swift-mcp-7c1d2e3f"
    static let fixed = "static-swift-header-91ab"

    private func get(_ url: URL) async throws -> Data {
        try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: url) { data, _, error in
                if let data { continuation.resume(returning: data) } else {
                    continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
                }
            }.resume()
        }
    }

    @Test func anMcpServerGetsItsCredentialsAndTheModelNone() async throws {
        let quoting = try Paths.mcpURL("quoting")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("mcp-credentials-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: ["name": "mcp-credentials", "exchanges": [
            ["respond": ["tool_calls": [["id": "c1", "name": "mcp_list_all", "arguments": [String: Any]()]]]],
            ["respond": ["content": "done"]],
        ]]).write(to: file)
        let provider = try Provider(scenario: file)
        defer { provider.stop() }
        let dump = FileManager.default.temporaryDirectory.appendingPathComponent("mcp-env-\(UUID().uuidString).txt")
        let github = Self.github
        let agent = try Agent(
            model: Model.openAIChat("gpt-4.1", baseURL: provider.baseURL, apiKey: "sk-test"),
            mcpServers: [
                .http("remote", url: quoting, headers: ["X-Static-Key": Self.fixed],
                      credentialHeaders: ["X-Api-Key": "api"], bearer: "github"),
                .stdio("envdump", command: "/bin/sh", args: ["-c", "printf '%s' \"$MCP_TOKEN\" > '\(dump.path)'; exit 1"],
                       credentialEnv: ["MCP_TOKEN": "github"]),
            ],
            deferral: Deferral(setting: .eager),
            credentials: Credentials().value("api", Self.api).callback("github") { _ in github })
        let result = try await agent.run("list everything")
        let seenURL = try #require(URL(string: quoting.replacingOccurrences(of: "/mcp", with: "/seen")))
        let seen = try #require(try JSONSerialization.jsonObject(with: try await get(seenURL)) as? [[String: String]])
        let mine = try #require(seen.first { $0["authorization"] == "Bearer \(Self.github)" }, "\(seen)")
        #expect(mine["x-api-key"] == Self.api && mine["x-static-key"] == Self.fixed)
        #expect(try String(contentsOf: dump, encoding: .utf8) == Self.github)
        let state = try await provider.state()
        let requests = String(decoding: try JSONSerialization.data(withJSONObject: state["requests"] ?? []), as: UTF8.self)
        let reached = requests + (result.toolCalls.first?.result ?? "")
        for value in [Self.github, Self.api, Self.fixed] {
            #expect(!reached.contains(value), "\(value) reached the model: \(reached)")
        }
        #expect(reached.contains("remote") && reached.contains("[credential:github]"), "\(reached)")
    }
}


/// OAuth and elicitation from Swift against the real OAuth-protected server (tests/mcp/oauth_server.py,
/// started by scripts/test-swift.sh): the consent callback plays the browser (it follows the
/// authorization URL to the server's /callback, which answers the URL it was sent to), the tokens go to
/// a Swift token store and never reach the model (a tool quoting its token gets the placeholder), and
/// the elicitation reaches the Swift handler. Negative control: without the consent callback the server
/// is unavailable and none of its tools appear.
@Suite struct McpOAuthTests {
    actor Store: McpTokenStore {
        var entries: [String: String] = [:]
        func load(_ key: String) -> String? { entries[key] }
        func save(_ key: String, _ value: String) { entries[key] = value }
        func clear(_ key: String) { entries[key] = nil }
        func all() -> [String: String] { entries }
    }

    actor Consents {
        var urls: [String] = []
        func add(_ url: String) { urls.append(url) }
    }

    /// The browser: GET the URL, following redirects; the body of the server's /callback is the redirect.
    static func browse(_ text: String) async throws -> String {
        guard let url = URL(string: text) else { throw ScenarioError("not a URL: \(text)") }
        return try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: url) { data, _, error in
                if let data { continuation.resume(returning: String(decoding: data, as: UTF8.self)) } else {
                    continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
                }
            }.resume()
        }
    }

    @Test func consentTokensInASwiftStoreElicitationAndNoTokenToTheModel() async throws {
        let url = try Paths.mcpURL("oauth")
        let base = String(url.dropLast("/mcp".count))
        let store = Store()
        let consents = Consents()
        let oauth = McpOAuth.authorizationCode(
            redirectUri: base + "/callback", clientName: "ambit-swift", tokenStore: store
        ) { authorization in
            await consents.add(authorization)
            return try await Self.browse(authorization)
        }
        let agent = try Agent(
            model: .testModel([
                .toolCall("mcp__notes__whoami", id: "c1"), .toolCall("mcp__notes__ask_name", id: "c2"),
                .toolCall("mcp__notes__leak_token", id: "c3"), .text("done"),
            ]),
            mcpServers: [
                .http("notes", url: url, oauth: oauth, onElicit: { request in
                    request.mode == "form" && (request.schemaJSON ?? "").contains("name") ? .accept(["name": "Ada"]) : .decline
                })
            ],
            deferral: Deferral(setting: .eager))
        let result = try await agent.run("who am I?")
        let outputs = result.toolCalls.map(\.result)
        #expect(outputs.count == 3, "\(outputs)")
        #expect(outputs.first?.contains("notes:read") == true, "\(outputs)")
        #expect(outputs.dropFirst().first?.hasPrefix("hello Ada") == true, "\(outputs)")
        #expect(outputs.last?.contains("your token is [credential:oauth.notes]") == true, "\(outputs)")
        let urls = await consents.urls
        #expect(urls.count == 1 && urls[0].contains("code_challenge_method=S256"), "\(urls)")
        let entry = try #require(await store.all()[url])
        let stored = try #require(try JSONSerialization.jsonObject(with: Data(entry.utf8)) as? [String: Any])
        let tokens = try #require(stored["token_response"] as? [String: Any])
        let access = try #require(tokens["access_token"] as? String)
        #expect(access.hasPrefix("at-"))
        #expect(!outputs.joined().contains(access))
    }

    @Test func withoutAConsentCallbackTheServerIsUnavailable() async throws {
        let url = try Paths.mcpURL("oauth")
        var oauth = McpOAuth.authorizationCode(redirectUri: "http://127.0.0.1:1/callback") { _ in "" }
        oauth.onAuthorize = nil
        let agent = try Agent(
            model: .testModel([.text("done")]), mcpServers: [.http("notes", url: url, oauth: oauth)],
            deferral: Deferral(setting: .eager))
        try await agent.refreshTools()
        #expect(try !agent.listTools().contains { $0.name.hasPrefix("mcp__notes__") })
        // The settings reach the core named as the core names them.
        let text = try #require(try toolingJSON([.http("n", url: url, oauth: McpOAuth(issuer: "https://as.example"))], nil))
        #expect(text.contains("\"issuer\":\"https:\\/\\/as.example\"") || text.contains("\"issuer\":\"https://as.example\""), "\(text)")
        var bounded = McpOAuth(issuer: "https://as.example")
        bounded.refreshLockTimeout = 0.25
        let boundedText = try #require(try toolingJSON([.http("n", url: url, oauth: bounded)], nil))
        #expect(boundedText.contains("\"refresh_lock_timeout_ms\":250"), "\(boundedText)")
    }
}
