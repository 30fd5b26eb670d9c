// Issue 12 from Swift: a panic in the core is a typed error with code "internal" — AmbitError.internal,
// SessionError.internal, LedgerError.internal — from a synchronous export, from a run's task, from the
// exports without an error of their own (listTools, toolNames, LedgerTools.names, which trapped the
// process before), from an async session call and from an async ledger call, and the process and the
// objects go on working after it (item 7). A blank tool name is AmbitError.config naming the name
// (item 10); Swift's list options are typed ([String]): a bare string cannot reach them. Under network
// remote, web_fetch refuses link-local addresses and this machine's unless `allowLocalAddresses` names
// them (item 11).

import Foundation
import Testing

@testable import Ambit

/// A scenario file for the loopback provider: its name and exchanges.
private func writeScenario(_ name: String, _ exchanges: [[String: Any]]) throws -> URL {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString).json")
    try JSONSerialization.data(withJSONObject: ["name": name, "exchanges": exchanges]).write(to: file)
    return file
}

private func panicProvider() throws -> Provider {
    try Provider(scenario: try writeScenario("hardening_panic", [
        ["respond": ["tool_calls": [["id": "a", "name": "ambit_testing_panic", "arguments": [String: Any]()]]]],
        ["respond": ["content": "done"]],
    ]))
}

private func internalError(_ error: Error) -> AmbitError? {
    guard let core = error as? CoreError else { return nil }
    let e = AmbitError(core)
    guard case .internal = e else { return nil }
    return e
}

/// The message every panic of the core's test hooks carries.
private let forced = "a panic forced by a test"

/// Asserts `body` throws the facade's internal error naming the forced panic.
private func expectInternal<T>(_ what: String, _ body: () throws -> T) {
    do {
        _ = try body()
        Issue.record("\(what): no error")
    } catch let e as AmbitError {
        guard case .internal = e else { Issue.record("\(what): not the internal error: \(e)"); return }
        #expect(e.code == "internal", "\(what)")
        #expect(e.message.contains(forced), "\(what): \(e.message)")
    } catch {
        Issue.record("\(what): not an AmbitError: \(error)")
    }
}

/// A file-backed SQLite URL in a fresh temporary directory.
private func sqliteURL(_ name: String) throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-hardening-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return "sqlite://" + dir.appendingPathComponent(name).path
}

/// The loopback provider scripted to call web_fetch on each URL in turn (one turn), then answer "done".
private func fetchProvider(_ name: String, _ urls: [String]) throws -> Provider {
    let calls: [[String: Any]] = urls.enumerated().map { i, url in
        ["id": "f\(i)", "name": "web_fetch", "arguments": ["url": url]]
    }
    return try Provider(scenario: try writeScenario(name, [["respond": ["tool_calls": calls]], ["respond": ["content": "done"]]]))
}

private struct Blank: AmbitTool {
    let name: String
    let description = "Blank."
    let parameters = #"{"type":"object","properties":{}}"#
    func call(arguments: [String: Any]) async throws -> String { "" }
}

@Suite struct HardeningTests {
    @Test func aPanicInASynchronousExportIsInternal() throws {
        do {
            try testingForcePanic()
            Issue.record("no error")
        } catch {
            let e = try #require(internalError(error), "not the internal error: \(error)")
            #expect(e.code == "internal")
            #expect(e.message.contains("a panic forced by a test"))
        }
    }

    @Test func aPanicInsideARunIsInternal() async throws {
        let p = try panicProvider()
        defer { p.stop() }
        let settings = Model.openAIChat("m", baseURL: p.baseURL, apiKey: "k").settings
        let core = try CoreAgent(config: AgentConfig(model: settings, ledger: testingPanickingTools()))
        do {
            _ = try await core.run(input: "go")
            Issue.record("the run finished")
        } catch {
            let e = try #require(internalError(error), "not the internal error: \(error)")
            #expect(e.message.contains("a panic forced by a test"))
        }
    }

    @Test func aPanicInsideAStreamedRunIsInternal() async throws {
        let p = try panicProvider()
        defer { p.stop() }
        let settings = Model.openAIChat("m", baseURL: p.baseURL, apiKey: "k").settings
        let core = try CoreAgent(config: AgentConfig(model: settings, ledger: testingPanickingTools()))
        let stream = try core.stream(input: "go")
        do {
            while try await stream.next() != nil {}
            Issue.record("the stream ended without the error")
        } catch {
            #expect(internalError(error) != nil, "not the internal error: \(error)")
        }
    }

    /// The exports without an error type of their own trapped the process on a core panic (UniFFI's
    /// `try!`); now each throws `AmbitError.internal`, and everything else goes on working.
    @Test func aPanicInListToolsToolNamesAndLedgerToolNamesIsInternal() async throws {
        let panicSwitch = try TestingPanicSwitch()
        let tools = LedgerTools(core: try panicSwitch.tools())
        let agent = try Agent(model: model, tools: [NamedTool()], ledger: tools)
        // Unarmed, the same calls answer (the control).
        #expect(try agent.listTools().map(\.name) == ["get_weather", "ambit_testing_panicking_spec"])
        #expect(try tools.names == ["ambit_testing_panicking_spec"])
        try panicSwitch.arm()
        expectInternal("listTools") { try agent.listTools() }
        expectInternal("toolNames") { try agent.toolNames }
        expectInternal("LedgerTools.names") { try tools.names }
        // The generated layer itself throws the typed case (not UniFFI's untyped rustPanic).
        do {
            _ = try agent.core.listTools()
            Issue.record("CoreAgent.listTools: no error")
        } catch {
            #expect(internalError(error) != nil, "not CoreError.Internal: \(error)")
        }
        // A run of the armed agent panics in its own task: the stream ends with the internal error.
        do {
            for try await _ in agent.stream("go") {}
            Issue.record("the stream ended without the error")
        } catch let e as AmbitError {
            #expect(e.code == "internal" && e.message.contains(forced), "\(e)")
        }
        // The process and the agent's other parts live on.
        let plain = try Agent(model: model, tools: [NamedTool()])
        #expect(try plain.toolNames == ["get_weather"])
        #expect(try plain.listTools().count == 1)
        #expect(try builtinToolNames.contains("web_fetch"))
        try await plain.refreshTools()
    }

    /// `Sessions.run` sizes the agent's request before the run starts, outside the run's task: a panic
    /// there (an armed tool spec) is `SessionError.internal`; the store goes on working.
    @Test func aPanicInAnAsyncSessionCallIsInternal() async throws {
        let url = try sqliteURL("sessions.db")
        let panicSwitch = try TestingPanicSwitch()
        let agent = try Agent(model: model, ledger: LedgerTools(core: try panicSwitch.tools()))
        try panicSwitch.arm()
        // The generated layer: the typed case.
        let core = try await CoreSessions.open(
            url: url, contextWindow: 200_000, compactAt: 0.85, keepRecent: 2, leaseMs: nil, busyWaitMs: nil)
        let first = try await core.create()
        do {
            _ = try await core.run(agent: agent.core, sessionId: first, input: "go", context: 0, messagesJson: nil)
            Issue.record("CoreSessions.run: no error")
        } catch let e as SessionCoreError {
            guard case let .Internal(message) = e else { Issue.record("not Internal: \(e)"); return }
            #expect(message.contains(forced), "\(message)")
        }
        // The facade.
        let sessions = try await Sessions.open(url)
        let sid = try await sessions.create()
        do {
            _ = try await sessions.run(agent, sessionId: sid, input: "go")
            Issue.record("Sessions.run: no error")
        } catch let e as SessionError {
            guard case let .internal(message) = e else { Issue.record("not .internal: \(e)"); return }
            #expect(e.code == "internal")
            #expect(message.contains(forced), "\(message)")
        }
        // The store and the process live on.
        let again = try await sessions.create()
        #expect(again != sid)
        #expect(try await sessions.entriesJSON(sid).hasPrefix("["))
        #expect(try await sessions.pending(sid) == nil)
    }

    /// A panic inside an async ledger call (after it has suspended once) is `LedgerError.internal`, never
    /// `ledger_store`; the same ledger then claims normally.
    @Test func aPanicInAnAsyncLedgerCallIsInternal() async throws {
        let core = try await CoreLedger.open(url: try sqliteURL("ledger.db"), fast: true)
        do {
            try await core.testingForcePanic()
            Issue.record("no error")
        } catch let e as LedgerCoreError {
            guard case let .Internal(message) = e else { Issue.record("not Internal: \(e)"); return }
            #expect(message.contains(forced), "\(message)")
            let facade = LedgerError(e)
            #expect(facade.code == "internal")
            #expect(facade == .internal(message: message))
        }
        let claimed = try await core.claim(
            scope: "s", candidates: [WorkCandidate(subjectKey: "k", fingerprint: nil)], limit: 1, leaseMs: 60_000,
            runId: "r", routineId: nil)
        #expect(claimed.map(\.subjectKey) == ["k"] && claimed[0].grantReason == .fresh)
        // An error the generated layer throws that is not the ledger's (a bug) is internal, not a store failure.
        #expect(LedgerError(ScenarioError("unexpected")).code == "internal")
    }

    /// Item 11 (the Python test's mirror): under network remote, web_fetch refuses link-local addresses
    /// (cloud metadata services) and this machine's; naming this machine's address in
    /// `allowLocalAddresses` lets the same fetch through; an entry that is not an address is a config error.
    @Test func webFetchUnderRemoteRefusesLinkLocalUnlessNamed() async throws {
        // A real HTTP server on loopback: another loopback provider, whose state page answers a GET.
        let server = try Provider(scenario: try writeScenario("hardening_local_server", []))
        defer { server.stop() }
        let local = String(server.baseURL.dropLast("/v1".count)) + "/__ambit/state"
        let remote = Policy(level: .read, network: .remote)
        let p = try fetchProvider("link_local", ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", local])
        defer { p.stop() }
        let refused = try await Agent(model: .openAIChat("m", baseURL: p.baseURL, apiKey: "k"), policy: remote,
                                      builtins: ["web_fetch"]).run("go").toolCalls
        #expect(refused.count == 3 && refused.allSatisfy(\.isError), "\(refused.map(\.result))")
        #expect(refused.first?.result.contains("link-local") == true, "\(refused.first?.result ?? "")")
        #expect(refused.dropFirst().first?.result.contains("link-local") == true)
        #expect(refused.last?.result.contains("hardening_local_server") == false)
        // Control: naming this machine's address lets the same fetch through.
        let named = Policy(level: .read, network: .remote, allowLocalAddresses: ["127.0.0.1"])
        let q = try fetchProvider("named", [local])
        defer { q.stop() }
        let ok = try await Agent(model: .openAIChat("m", baseURL: q.baseURL, apiKey: "k"), policy: named,
                                 builtins: ["web_fetch"]).run("go").toolCalls
        #expect(ok.count == 1 && ok[0].isError == false, "\(ok.map(\.result))")
        #expect(ok.first?.result.contains("hardening_local_server") == true, "\(ok.first?.result ?? "")")
        // An entry that is not an address, and the JSON form every language shares.
        let bad = try #require(configError {
            try Agent(model: model, policy: Policy(level: .read, network: .remote, allowLocalAddresses: ["metadata"]),
                      builtins: ["web_fetch"])
        })
        #expect(bad.message.contains("allow_local_addresses: 'metadata' is not an IP address"), "\(bad.message)")
        let parsed = try Policy(json: #"{"network":"remote","allow_local_addresses":["127.0.0.1","fe80::/10"]}"#)
        #expect(parsed.allowLocalAddresses == ["127.0.0.1", "fe80::/10"])
    }

    @Test(arguments: ["", "   "]) func aBlankToolNameIsAConfigError(name: String) throws {
        let error = try #require(configError { try Agent(model: model, tools: [Blank(name: name)]) })
        #expect(error.code == "config")
        #expect(error.message.contains("name"))
    }
}
