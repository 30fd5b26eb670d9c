// Sessions from Swift: a run continues the log; a parked run is resumed by another store handle and
// another agent, as another process would; a run Python parked is resumed here. (The other cross-language
// resumes run in the Node suite.)

import Foundation
import Testing

@testable import Ambit

private func sessionsURL() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-sessions-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return "sqlite://" + dir.appendingPathComponent("sessions.db").path
}

private func provider(_ name: String, _ exchanges: [[String: Any]]) throws -> Provider {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString).json")
    let data = try JSONSerialization.data(withJSONObject: ["name": name, "exchanges": exchanges])
    try data.write(to: file)
    return try Provider(scenario: file)
}

private struct SendEmail: AmbitTool {
    let name = "send_email"
    let description = "Send the drafted email."
    let parameters = #"{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}"#
    let level = Level.read
    let requiresApproval = true
    func call(arguments: [String: Any]) async throws -> String { "sent to \(arguments["to"] as? String ?? "?")" }
}

/// Opened once: every `wait()` before and after returns.
private actor Latch {
    private var opened = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if opened { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func open() {
        opened = true
        for c in waiting { c.resume() }
        waiting = []
    }
}

/// `wait`: says it was entered, then returns once the gate opens.
private struct Wait: AmbitTool {
    let name = "wait"
    let description = "Wait until released."
    let parameters = #"{"type":"object","properties":{}}"#
    let entered: Latch
    let gate: Latch
    func call(arguments: [String: Any]) async throws -> String {
        await entered.open()
        await gate.wait()
        return "done"
    }
}

@Suite struct SessionTests {
    /// A run on a busy session is refused at once, or waits as asked (`busyWaitMs`): refused once the
    /// bound is spent, saying so; with room, it takes the session once the first run lets it go.
    @Test func aRunAskedToWaitForABusySessionWaitsWithinItsBound() async throws {
        let p = try provider("swift_busy_wait", [
            ["respond": ["tool_calls": [["id": "w", "name": "wait", "arguments": [String: Any]()]]]],
            ["respond": ["content": "first"]],
            ["respond": ["content": "second"]],
        ])
        defer { p.stop() }
        let url = sessionsURL()
        let sessions = try await Sessions.open(url)
        let (entered, gate) = (Latch(), Latch())
        let agent = try Agent(model: .openAIChat("m", baseURL: p.baseURL), tools: [Wait(entered: entered, gate: gate)])
        let sid = try await sessions.create()
        let first = Task { try await sessions.run(agent, sessionId: sid, input: "one") }
        await entered.wait()
        do {
            _ = try await sessions.run(agent, sessionId: sid, input: "two")
            Issue.record("a second run was not refused")
        } catch let SessionError.busy(message) {
            #expect(!message.contains("waited"), "\(message)")
        }
        let hasty = try await Sessions.open(url, leaseMs: 2000, busyWaitMs: 200)
        do {
            _ = try await hasty.run(agent, sessionId: sid, input: "two")
            Issue.record("a run that waited 200 ms was not refused")
        } catch let SessionError.busy(message) {
            #expect(message.contains("waited"), "\(message)")
        }
        let patient = try await Sessions.open(url, busyWaitMs: 60_000)
        let second = Task { try await patient.run(agent, sessionId: sid, input: "two") }
        await gate.open()
        #expect(try await first.value.output == "first")
        #expect(try await second.value.output == "second")
        do {
            _ = try await Sessions.open(url, leaseMs: 1)
            Issue.record("a 1 ms lease was not refused")
        } catch let SessionError.invalidArgument(message) {
            #expect(message.contains("lease_ms"), "\(message)")
        }
    }

    @Test func aParkedRunIsResumedElsewhereAndTheLogIsSearchable() async throws {
        let p = try provider("swift_parks", [
            ["respond": ["tool_calls": [["id": "a", "name": "send_email", "arguments": ["to": "ops@example.com"]]]]],
            ["expect": ["messages_count": 3,
                        "messages_tail": [["role": "tool", "tool_call_id": "a", "content": "sent to ops@example.com"]]],
             "respond": ["content": "Sent."]],
        ])
        defer { p.stop() }
        let url = sessionsURL()
        func agent(_ answer: ApprovalDecision) throws -> Agent {
            try Agent(model: .openAIChat("m", baseURL: p.baseURL), tools: [SendEmail()],
                      policy: Policy(level: .read, approvals: { _ in answer }), builtins: sessionTools)
        }
        let here = try await Sessions.open(url)
        let sid = try await here.create()
        do {
            _ = try await here.run(try agent(.later), sessionId: sid, input: "Send it.")
            Issue.record("the run did not park")
        } catch let SessionError.awaitingApproval(parked, request, _) {
            #expect(parked == sid)
            #expect(request["tool"] == "send_email")
        }
        let there = try await Sessions.open(url)
        #expect(try await there.pending(sid) != nil)
        let done = try await there.resume(try agent(.deny(reason: "unused")), sessionId: sid, decision: .approve)
        #expect(done.output == "Sent.")
        #expect(try await there.pending(sid) == nil)
        #expect(try await there.search(sid, "OPS@").hasPrefix("#2 assistant: [call send_email"))
        do {
            _ = try await there.entriesJSON("nope")
            Issue.record("a missing session was found")
        } catch let error as SessionError {
            #expect(error.code == "session_not_found")
        }
    }

    /// scripts/test-swift.sh parks a run from Python (its handler answers later) on SQLite and PostgreSQL and
    /// records each store's URL and session id in .artifacts/crosslang; Swift resumes it.
    @Test func aRunParkedByPythonIsResumedBySwift() async throws {
        let dir = Paths.packageDir.appendingPathComponent(".artifacts/crosslang")
        func read(_ name: String) -> String? {
            (try? String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let baseURL = read("provider.url"), read("sqlite.sid") != nil else {
            print("no run parked by Python in \(dir.path) (scripts/test-swift.sh parks one when the Python venv is built)")
            return
        }
        // In the order the provider serves them: SQLite, then PostgreSQL.
        for store in ["sqlite", "postgres"] {
            guard let url = read("\(store).url"), let sid = read("\(store).sid") else { continue }
            let sessions = try await Sessions.open(url)
            let pending = try #require(try await sessions.pending(sid), "\(store): nothing pending")
            let request = try JSONSerialization.jsonObject(with: Data(pending.utf8)) as? [String: Any]
            #expect(request?["tool"] as? String == "send_email", "\(store): \(pending)")
            let agent = try Agent(model: .openAIChat("m", baseURL: baseURL), tools: [SendEmail()],
                                  policy: Policy(level: .read, approvals: { _ in .deny(reason: "unused") }))
            let done = try await sessions.resume(agent, sessionId: sid, decision: .approve)
            #expect(done.output == "Sent.", "\(store)")
            #expect(try await sessions.pending(sid) == nil, "\(store)")
        }
    }

    /// Exactly once: two resumes of one parked approval at once; one runs it, the other is refused with
    /// `session_not_parked`, and the tool's effect happens once. A resumed session runs again after.
    @Test func twoResumesOfOneParkedApprovalRunTheToolOnce() async throws {
        let p = try provider("swift_resume_once", [
            ["respond": ["tool_calls": [["id": "a", "name": "send_email", "arguments": ["to": "ops@example.com"]]]]],
            ["respond": ["content": "Sent."]],
        ])
        defer { p.stop() }
        let sessions = try await Sessions.open(sessionsURL())
        let agent = try Agent(model: .openAIChat("m", baseURL: p.baseURL), tools: [SendEmail()],
                              policy: Policy(level: .read, approvals: { _ in .later }))
        let sid = try await sessions.create()
        do {
            _ = try await sessions.run(agent, sessionId: sid, input: "Send it.")
            Issue.record("the run did not park")
        } catch SessionError.awaitingApproval {}
        func resume() async -> String {
            do {
                _ = try await sessions.resume(agent, sessionId: sid, decision: .approve)
                return "ok"
            } catch let error as SessionError {
                return error.code
            } catch {
                return "\(error)"
            }
        }
        async let first = resume()
        async let second = resume()
        let outcomes = await [first, second].sorted()
        #expect(outcomes == ["ok", "session_not_parked"], "\(outcomes)")
        let entries = try await sessions.entriesJSON(sid)
        #expect(entries.components(separatedBy: "sent to ops@example.com").count == 2, "\(entries)")
    }

    /// The context window is the model's (its family's default, or `contextWindow`), unless the store
    /// names one.
    @Test func theContextWindowComesFromTheModelUnlessTheStoreNamesOne() async throws {
        for (name, modelWindow, storeWindow, expected) in [
            ("gpt-4", nil, nil, 8_192), ("my-local-model", nil, nil, 32_768), ("gpt-4", 50_000, nil, 50_000),
            ("gpt-4", 50_000, 7_000, 7_000),
        ] as [(String, Int?, Int?, Int)] {
            let p = try provider("swift_window", [
                ["respond": ["tool_calls": [["id": "c", "name": "context_check", "arguments": [String: Any]()]]]],
                ["respond": ["content": "ok"]],
            ])
            defer { p.stop() }
            let sessions = try await Sessions.open(sessionsURL(), contextWindow: storeWindow)
            let model = Model(wire: .openAiChat, name: name, baseURL: p.baseURL, maxRetries: 0,
                              contextWindow: modelWindow)
            let agent = try Agent(model: model, builtins: sessionTools)
            let sid = try await sessions.create()
            let result = try await sessions.run(agent, sessionId: sid, input: "how full?")
            let report = result.toolCalls.first?.result ?? ""
            #expect(report.contains(" of \(expected) tokens"), "\(name): \(report)")
        }
    }
}
