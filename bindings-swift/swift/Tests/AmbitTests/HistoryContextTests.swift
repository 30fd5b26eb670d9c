// Message history and run context from Swift (issue 21, items 4 and 5): `Codable` messages round-trip
// through `result.messages` and back into `run(messages:)`; a run's context reaches its own tools and no
// other run's. The shared scenario files (history_*, run_context) run in ScenarioTests.

import Foundation
import Testing

@testable import Ambit

/// The host's value: the current user.
struct CurrentUser: Sendable {
    let name: String
}

/// Holds the first caller until a second one arrives: both runs are in flight together.
final class PairGate: @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func arrive() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            waiting.append(c)
            let ready = waiting.count >= 2 ? waiting : []
            if !ready.isEmpty { waiting = [] }
            lock.unlock()
            for w in ready { w.resume() }
        }
    }
}

/// A slot both runs can see: what a context shared between runs would be.
final class SharedSlot: @unchecked Sendable {
    private let lock = NSLock()
    private var value = ""
    func set(_ v: String) { lock.lock(); value = v; lock.unlock() }
    func get() -> String { lock.lock(); defer { lock.unlock() }; return value }
}

struct WhoAmI: AmbitTool {
    let name = "whoami"
    let description = "The current user."
    let parameters = #"{"type":"object","properties":{}}"#
    let gate: PairGate?
    /// The negative control's slot: when set, the tool answers from it instead of its own context.
    let shared: SharedSlot?

    func call(arguments: [String: Any], context: TaskContext) async throws -> String {
        guard let user = context.context as? CurrentUser else { throw ToolError("the run has no context") }
        shared?.set(user.name)
        await gate?.arrive()
        return shared?.get() ?? user.name
    }
}

/// Calls `whoami` until the conversation holds its result, then answers with it.
func whoamiModel() -> Model {
    Model.functionModel { request in
        if let last = request.messages.last, last["role"] as? String == "tool" {
            return .text("you are \(last["content"] as? String ?? "")")
        }
        return .toolCall("whoami")
    }
}

@Suite struct HistoryContextTests {
    func twoRuns(_ tool: WhoAmI) async throws -> [String] {
        let agent = try Agent(model: whoamiModel(), tools: [tool])
        async let a = agent.run("who am I?", context: CurrentUser(name: "ada"))
        async let b = agent.run("who am I?", context: CurrentUser(name: "bob"))
        return try await [a.output, b.output]
    }

    @Test func twoConcurrentRunsEachSeeTheirOwnContext() async throws {
        #expect(try await twoRuns(WhoAmI(gate: PairGate(), shared: nil)) == ["you are ada", "you are bob"])
    }

    /// Negative control: a tool answering from a slot the runs share gives both one user.
    @Test func theCheckCatchesAContextSharedBetweenRuns() async throws {
        let outputs = try await twoRuns(WhoAmI(gate: PairGate(), shared: SharedSlot()))
        #expect(outputs[0] == outputs[1])
        #expect(outputs != ["you are ada", "you are bob"])
    }

    @Test func aRunWithoutContextGivesItsToolNone() async throws {
        let agent = try Agent(model: whoamiModel(), tools: [WhoAmI(gate: nil, shared: nil)])
        let result = try await agent.run("who am I?")
        #expect(result.toolCalls.first?.isError == true)
        #expect(result.toolCalls.first?.result.contains("the run has no context") == true)
    }

    /// Session runs in flight together, each with its user; the control: the same session run without a
    /// context gives its tool none.
    @Test func sessionRunsEachSeeTheirOwnContext() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-sctx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sessions = try await Sessions.open("sqlite://\(dir.path)/s.db")
        let (s1, s2) = (try await sessions.create(), try await sessions.create())
        let agent = try Agent(model: whoamiModel(), tools: [WhoAmI(gate: PairGate(), shared: nil)])
        async let a = sessions.run(agent, sessionId: s1, input: "who am I?", context: CurrentUser(name: "ada"))
        async let b = sessions.run(agent, sessionId: s2, input: "who am I?", context: CurrentUser(name: "bob"))
        #expect(try await [a.output, b.output] == ["you are ada", "you are bob"])
        let lone = try Agent(model: whoamiModel(), tools: [WhoAmI(gate: nil, shared: nil)])
        let bare = try await sessions.run(lone, sessionId: s1, input: "who am I?")
        #expect(bare.toolCalls.first?.isError == true)
        #expect(bare.toolCalls.first?.result.contains("the run has no context") == true)
    }

    @Test func aHistoryRoundTripsAsCodableMessages() async throws {
        let agent = try Agent(model: .testModel([.toolCall("get_weather", arguments: #"{"city":"Oslo"}"#),
                                                 .text("sunny"), .text("again")]),
                              tools: [CityWeather()])
        let first = try await agent.run("Weather in Oslo?")
        guard first.messages.count == 4, case let .assistant(_, calls) = first.messages[1],
            case let .tool(callId, _, content, _) = first.messages[2]
        else {
            Issue.record("unexpected messages: \(first.messages)")
            return
        }
        #expect(calls.first?.id == callId && content == "sunny in Oslo")
        let second = try await agent.run(messages: first.messages + [.user("And tomorrow?")])
        #expect(second.output == "again")
        #expect(Array(second.messages.prefix(4)) == first.messages)
        // The JSON form is the core's: it decodes back to the same messages.
        let json = try JSONEncoder().encode(first.messages)
        #expect(try JSONDecoder().decode([Message].self, from: json) == first.messages)
    }

    @Test func aBadHistoryNamesTheMessageAndField() async throws {
        let agent = try Agent(model: .testModel([.text("never")]), tools: [])
        do {
            _ = try await agent.run(messages: [.user("hi"), .tool(callId: "nope", name: "t", content: "r", isError: false)])
            Issue.record("a result answering no call was taken")
        } catch let AmbitError.invalidMessage(index, field, _) {
            #expect(index == 1 && field == "call_id")
        }
        do {
            _ = try await agent.run(messagesJSON: #"[{"role":"user","content":5}]"#)
            Issue.record("a content of the wrong type was taken")
        } catch let AmbitError.invalidMessage(index, field, _) {
            #expect(index == 0 && field == "content")
        }
    }
}
