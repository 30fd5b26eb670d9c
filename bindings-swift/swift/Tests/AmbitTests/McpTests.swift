// MCP and deferral settings from Swift: what the core refuses, and how the listing shows deferral.
// (The scenario mcp_deferred_tools runs an agent against the real server-everything over HTTP.)

import Foundation
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
