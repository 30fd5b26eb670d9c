// Against llama.cpp's real OpenAI-compatible server (the `xllamacpp` wheel) with the suite's tiny model:
// scripts/test-swift.sh starts tests/llama/serve.py --tiny on the host (the helper every language starts;
// the Swift root shares the host's network, and has no Python) and writes its URL to .artifacts/llama.url;
// AMBIT_LLAMA_URL overrides it. One server for the whole suite.

import Foundation
import Testing

@testable import Ambit

/// The tool the model calls; it records the cities it was asked about.
final class WeatherCalls: AmbitTool, @unchecked Sendable {
    let name = "get_weather"
    let description = "Current weather for a city."
    let parameters = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
    private let lock = NSLock()
    private var seen: [String] = []
    var cities: [String] {
        lock.lock()
        defer { lock.unlock() }
        return seen
    }

    /// Synchronous, so the lock is never held across a suspension.
    private func record(_ city: String) {
        lock.lock()
        defer { lock.unlock() }
        seen.append(city)
    }

    func call(arguments: [String: Any]) async throws -> String {
        let city = arguments["city"] as? String ?? ""
        record(city)
        return "sunny in \(city)"
    }
}

func llamaURL() throws -> String {
    if let url = ProcessInfo.processInfo.environment["AMBIT_LLAMA_URL"], !url.isEmpty { return url }
    let file = Paths.packageDir.appendingPathComponent(".artifacts/llama.url")
    return try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite(.serialized) struct LlamaServerTests {
    func agent(_ tool: WeatherCalls, stream: Bool, textToolCalls: TextToolCalls? = nil) throws -> Agent {
        try Agent(model: Model(wire: .openAiChat, name: "tiny", baseURL: try llamaURL(), apiKey: "none", stream: stream,
                               textToolCalls: textToolCalls),
                  tools: [tool], maxTurns: 4)
    }

    @Test(arguments: [false, true])
    func aToolCallOfTheRealServerReachesASwiftTool(stream: Bool) async throws {
        let tool = WeatherCalls()
        let result = try await agent(tool, stream: stream).run("Weather in Paris?")
        // The server's grammar wrote the call ({"city": "P"}); the model's answer to the result is "OK".
        #expect(tool.cities == ["P"])
        #expect(result.output == "OK")
        #expect(result.turns == 2)
        #expect(result.usage.requests == 2)
    }

    @Test(arguments: [false, true])
    func constrainedDecodingMakesTheRealServerWriteAValidCallAsText(stream: Bool) async throws {
        let tool = WeatherCalls()
        var fromText: [String] = []
        var shown = ""
        var finished: RunResult?
        for try await event in try agent(tool, stream: stream, textToolCalls: .constrained).stream("Weather in Paris, as json?") {
            switch event {
            case let .toolCallRequested(_, name, _, readFromText) where readFromText: fromText.append(name)
            case let .textDelta(text): shown += text
            case let .runFinished(_, result): finished = result
            default: break
            }
        }
        let result = try #require(finished)
        #expect(tool.cities == ["P"])
        #expect(fromText == ["get_weather"])
        #expect(result.output == "P")
        #expect(result.stopReason == .end)
        #expect(shown == "P", "the call's JSON is never shown as text")
    }

    @Test func withoutTheConstraintTheSameModelWritesNoCall() async throws {
        // Negative control: auto reads calls but asks for no grammar; the bigram table's text is no JSON.
        let tool = WeatherCalls()
        let result = try await agent(tool, stream: false, textToolCalls: .auto).run("Weather in Paris, as json?")
        #expect(tool.cities.isEmpty)
        #expect(result.toolCalls.isEmpty)
        #expect(result.output.hasPrefix("{"))
        #expect(result.stopReason == .length)
    }
}
