// The test model users get (`Model.testModel`, `Model.functionModel`): the README's example test, its
// refusals, and that its replies go through the real wire decoding.

import Foundation
import Testing

@testable import Ambit

struct CityWeather: AmbitTool {
    let name = "get_weather"
    let description = "Current weather for a city."
    let parameters = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
    func call(arguments: [String: Any]) async throws -> String { "sunny in \(arguments["city"] as? String ?? "?")" }
}

/// Collects what a function model was asked.
private actor Seen {
    var requests: [TestRequest] = []
    func add(_ r: TestRequest) { requests.append(r) }
}

@Suite struct TestModelTests {
    @Test func theReadmeExample() async throws {
        let agent = try Agent(
            model: .testModel([.toolCall("get_weather", arguments: #"{"city":"Paris"}"#), .text("Sunny in Paris.")]),
            tools: [CityWeather()])
        let result = try await agent.run("Weather in Paris?")
        #expect(result.output == "Sunny in Paris.")
        #expect(result.toolCalls.map(\.result) == ["sunny in Paris"])
    }

    @Test(arguments: [Wire.openAiChat, .anthropic, .openAiResponses])
    func aFunctionModelSeesTheConversationAndTheWireBody(_ wire: Wire) async throws {
        let seen = Seen()
        let model = Model.functionModel(wire: wire) { request in
            await seen.add(request)
            if request.index == 1 { return .toolCall("get_weather", arguments: #"{"city":"Oslo"}"#) }
            return .text("done after \(request.messages.count) messages")
        }
        let agent = try Agent(model: model, instructions: "Be brief.", tools: [CityWeather()])
        #expect(try await agent.run("Weather in Oslo?").output == "done after 3 messages")
        let requests = await seen.requests
        #expect(requests.first?.lastUserMessage == "Weather in Oslo?")
        #expect(requests.last?.messages.last?["content"] as? String == "sunny in Oslo")
        #expect(requests.first?.toolNames == ["get_weather"])
        let body = try #require(requests.last?.body)
        switch wire {
        case .openAiResponses: #expect(body["instructions"] as? String == "Be brief.")
        case .anthropic: #expect(requests.last?.bodyJSON.contains("Be brief.") == true && body["system"] != nil)
        case .openAiChat: #expect((body["messages"] as? [[String: Any]])?.first?["role"] as? String == "system")
        }
    }

    @Test(arguments: [Wire.openAiChat, .anthropic, .openAiResponses])
    func aStreamedReplyArrivesAsTheWireStreamsIt(_ wire: Wire) async throws {
        func deltas(_ stream: Bool) async throws -> [String] {
            let agent = try Agent(model: .testModel([.text("It is sunny in Paris today.")], wire: wire, stream: stream))
            var out: [String] = []
            for try await event in agent.stream("Weather?") {
                if case let .textDelta(text) = event { out.append(text) }
            }
            return out
        }
        let streamed = try await deltas(true)
        #expect(streamed.joined() == "It is sunny in Paris today.")
        // Through the wire's server-sent events the text comes in pieces; the negative control: unstreamed,
        // the same reply is one piece.
        #expect(streamed.count > 1, "\(streamed)")
        #expect(try await deltas(false) == ["It is sunny in Paris today."])
    }

    @Test func aRequestPastTheScriptFailsTheRunNamingIt() async throws {
        let agent = try Agent(
            model: .testModel([.toolCall("get_weather", arguments: #"{"city":"Rome"}"#)]), tools: [CityWeather()])
        do {
            _ = try await agent.run("Weather in Rome?")
            Issue.record("the run should have failed")
        } catch let error as AmbitError {
            #expect(error.code == "model_response")
            #expect(error.description.contains("no reply left for request 2: it was scripted with 1"), "\(error)")
        }
    }

    @Test func aFunctionThatThrowsFailsTheRunNamingIt() async throws {
        let agent = try Agent(model: .functionModel { _ in throw ToolError("no answer for you") })
        do {
            _ = try await agent.run("hi")
            Issue.record("the run should have failed")
        } catch let error as AmbitError {
            #expect(error.code == "model_response")
            #expect(error.description.contains("the test model's function failed: no answer for you"), "\(error)")
        }
    }

    @Test func badRepliesAreRefusedWhenTheAgentIsBuilt() {
        for (replies, text) in [
            ([Reply.text("ok"), .toolCall("")], "empty name"),
            ([Reply.toolCall("t", arguments: "[1]")], "not a JSON object"),
            ([Reply.toolCall("t", arguments: "not json")], "not a JSON object"),
        ] {
            do {
                _ = try Agent(model: .testModel(replies))
                Issue.record("\(replies) should be refused")
            } catch let error as AmbitError {
                #expect(error.code == "config" && error.description.contains(text), "\(error)")
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }
}
