// Issue 12 from Swift: a panic in the core is AmbitError.internal (code "internal"), from a synchronous
// export and from a run's task (item 7); a blank tool name is AmbitError.config naming the name
// (item 10). Swift's list options are typed ([String]): a bare string cannot reach them.

import Foundation
import Testing

@testable import Ambit

private func panicProvider() throws -> Provider {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("hardening-\(UUID().uuidString).json")
    let exchanges: [[String: Any]] = [
        ["respond": ["tool_calls": [["id": "a", "name": "ambit_testing_panic", "arguments": [String: Any]()]]]],
        ["respond": ["content": "done"]],
    ]
    try JSONSerialization.data(withJSONObject: ["name": "hardening_panic", "exchanges": exchanges]).write(to: file)
    return try Provider(scenario: file)
}

private func internalError(_ error: Error) -> AmbitError? {
    guard let core = error as? CoreError else { return nil }
    let e = AmbitError(core)
    guard case .internal = e else { return nil }
    return e
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
        let stream = core.stream(input: "go")
        do {
            while try await stream.next() != nil {}
            Issue.record("the stream ended without the error")
        } catch {
            #expect(internalError(error) != nil, "not the internal error: \(error)")
        }
    }

    @Test(arguments: ["", "   "]) func aBlankToolNameIsAConfigError(name: String) throws {
        let error = try #require(configError { try Agent(model: model, tools: [Blank(name: name)]) })
        #expect(error.code == "config")
        #expect(error.message.contains("name"))
    }
}
