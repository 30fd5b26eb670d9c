// Typed tool parameters from Swift: a `Decodable` argument type with its JSON Schema. The core checks
// each call by the schema; the checked arguments are decoded as the type before the tool runs.

import Foundation
import Testing

@testable import Ambit

private struct Forecast: Decodable {
    let city: String
    let days: Int
}

/// Counts what the tool saw, across the calls of a run.
private actor Seen {
    var calls: [String] = []
    func add(_ call: String) { calls.append(call) }
}

@Suite struct TypedToolTests {
    @Test func aDecodableTypesAToolsArgumentsAfterTheCoreChecksThem() async throws {
        let parameters: [String: Any] = [
            "type": "object",
            "properties": ["city": ["type": "string"], "days": ["type": "integer", "minimum": 1]],
            "required": ["city", "days"], "additionalProperties": false,
        ]
        let exchanges: [[String: Any]] = [
            ["expect": ["body": ["tools": [["function": ["name": "forecast", "strict": true]]]]],
             "respond": ["tool_calls": [
                ["id": "c1", "name": "forecast", "arguments": ["city": "Paris", "days": 2]],
                // Refused by the core (below the minimum): the tool never sees it.
                ["id": "c2", "name": "forecast", "arguments": ["city": "Oslo", "days": 0]],
             ]]],
            ["expect": ["messages_tail": [
                ["role": "tool", "tool_call_id": "c1", "content": "Paris: sunny for 2 days"],
                ["role": "tool", "tool_call_id": "c2", "content": ["$contains": "days"]],
             ]],
             "respond": ["content": "Sunny in Paris."]],
        ]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("swift_typed_tool-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: ["name": "swift_typed_tool", "exchanges": exchanges]).write(to: file)
        let p = try Provider(scenario: file)
        let seen = Seen()
        let forecast = try TypedTool<Forecast>(name: "forecast", description: "The forecast.", parameters: parameters) { args, _ in
            await seen.add("\(args.city) \(args.days)")
            return "\(args.city): sunny for \(args.days) days"
        }
        let agent = try Agent(model: Model(wire: .openAiChat, name: "gpt-4.1", baseURL: p.baseURL, apiKey: "k", maxRetries: 0),
                              tools: [forecast])
        let result = try await agent.run("Forecast for Paris?")
        #expect(result.output == "Sunny in Paris.")
        #expect(await seen.calls == ["Paris 2"])
        try await p.check([:], "swift_typed_tool")
    }

    /// Arguments the schema lets through but the type cannot decode (a schema looser than the type): the
    /// call's error result names the type, and the tool's body never runs.
    @Test func argumentsThatDoNotDecodeAreTheCallsErrorNamingTheType() async throws {
        let loose = TypedTool<Forecast>(name: "forecast", description: "", parametersJSON: #"{"type":"object"}"#) { _, _ in
            Issue.record("run must not see arguments that do not decode")
            return ""
        }
        await #expect(throws: ToolError.self) {
            _ = try await loose.call(arguments: ["city": "Paris"], context: TaskContext(token: 0))
        }
        do {
            _ = try await loose.call(arguments: ["city": "Paris"], context: TaskContext(token: 0))
        } catch {
            #expect("\(error)".contains("do not decode as Forecast"), "\(error)")
        }
        // Negative control: arguments that decode reach the body.
        let ok = TypedTool<Forecast>(name: "forecast", description: "", parametersJSON: #"{"type":"object"}"#) { a, _ in
            "\(a.city) \(a.days)"
        }
        #expect(try await ok.call(arguments: ["city": "Paris", "days": 3], context: TaskContext(token: 0)) == "Paris 3")
    }
}
