// Sessions from Swift: a run continues the log; a parked run is resumed by another store handle and
// another agent, as another process would. (The cross-language resumes run in the Node suite.)

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

@Suite struct SessionTests {
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
}
