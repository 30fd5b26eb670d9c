// Permissions in the Swift binding: the scenario suite's approval handler and checks (the scenario
// fields `policy`, `approvals`, `expect.tool_list`, `expect.approval_requests`), and the binding's own
// tests: bad input is `AmbitError.config` naming it, and a handler (a plain closure here; the scenario
// suite's is an actor) that throws or answers garbage is the core's denial, never a crash.

import Foundation
import Testing

@testable import Ambit

/// The host's approval handler in a scenario (an actor, so its `decide` is async): answers from
/// `approvals`, in order, and records every request it gets.
actor ScriptedApprovals: ApprovalHandler {
    /// This run's own mark, for what its tools record (tests run in parallel).
    nonisolated let tag = UUID().uuidString
    private var answers: [ApprovalDecision]
    private(set) var requests: [ApprovalRequest] = []

    init(_ scenario: [String: Any]) throws {
        answers = try (scenario["approvals"] as? [[String: Any]] ?? []).map(decision)
    }

    func decide(_ request: ApprovalRequest) async throws -> ApprovalDecision {
        requests.append(request)
        await Task.yield()
        guard !answers.isEmpty else { throw ScenarioError("the scenario has no answer left") }
        return answers.removeFirst()
    }
}

/// A scenario's answer (an ApprovalDecision object) as the Swift enum.
func decision(_ json: [String: Any]) throws -> ApprovalDecision {
    switch json["decision"] as? String {
    case "approve": return .approve
    case "deny": return .deny(reason: json["reason"] as? String ?? "")
    case "revise": return .revise(argumentsJson: try jsonText(json["arguments"] ?? NSNull()))
    case "later": return .later
    default: throw ScenarioError("not an approval decision: \(json)")
    }
}

/// The scenario's `policy` (the core's PolicyConfig fields, plus `"approvals": true` for the handler).
func scenarioPolicy(_ scenario: [String: Any], _ approvals: ScriptedApprovals) throws -> Policy? {
    let fixture = try writeFixture(scenario)
    guard var fields = scenario["policy"] as? [String: Any] ?? (fixture == nil ? nil : [:]) else { return nil }
    if let fixture { fields["working_directory"] = fixture }
    let on = fields.removeValue(forKey: "approvals") as? Bool ?? false
    return try Policy(json: try jsonText(fields), approvals: on ? approvals as any ApprovalHandler : nil)
}

/// A value as JSONSerialization reads it, so both sides of a comparison are alike.
func reparsed(_ value: [String: Any]) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: Data(try jsonText(value).utf8)) as? [String: Any] ?? [:]
}

/// Each wanted entry's given keys equal the actual entry's; the lists are as long as each other.
func checkEntries(_ got: [[String: Any]], _ want: [[String: Any]], _ what: String) throws {
    #expect(got.count == want.count, "\(what): \(got)")
    for (index, (actual, wanted)) in zip(got, want).enumerated() {
        let actual = try reparsed(actual)
        for (key, value) in wanted {
            #expect(actual[key].map { jsonEqual($0, value) } == true, "\(what)[\(index)].\(key): \(actual)")
        }
    }
}

func checkToolList(_ got: [ToolListing], _ want: [[String: Any]], _ file: String) throws {
    let rows: [[String: Any]] = got.map {
        [
            "name": $0.name, "level": $0.level.description, "declared_level": $0.declaredLevel.description,
            "status": $0.status.description, "approval": $0.approval,
        ]
    }
    try checkEntries(rows, want, "\(file): tool_list")
}

func checkApprovalRequests(_ got: [ApprovalRequest], _ want: [[String: Any]], _ file: String) throws {
    let rows: [[String: Any]] = try got.map {
        [
            "call_id": $0.callId, "tool": $0.tool,
            "arguments": try JSONSerialization.jsonObject(with: Data($0.argumentsJson.utf8)),
            "tool_level": $0.toolLevel.description, "session_level": $0.sessionLevel.description,
            "reason": $0.reason.description,
        ]
    }
    try checkEntries(rows, want, "\(file): approval_requests")
}

struct Mailer: AmbitTool {
    let name = "send_email"
    let description = "Sends an email."
    let parameters = #"{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}"#
    let level = Level.workspace
    func call(arguments: [String: Any]) async throws -> String { "sent to \(arguments["to"] as? String ?? "?")" }
}

struct Flagged: AmbitTool {
    var name = "get_weather"
    let description = "Current weather."
    let parameters = #"{"type":"object","properties":{"city":{"type":"string"}}}"#
    let level = Level.read
    let requiresApproval = true
    let allowBlank = ["city"]
    func call(arguments: [String: Any]) async throws -> String { "sunny" }
}

@Suite struct PolicyTests {
    @Test func unknownPolicyFieldOrLevelIsAConfigErrorNamingIt() throws {
        for (json, name) in [
            (#"{"level":"Read"}"#, "Read"),
            (#"{"levle":"read"}"#, "levle"),
            (#"{"network":"local"}"#, "local"),
            (#"{"level_overrides":{"get_weather":"admin"}}"#, "admin"),
            (#"not json"#, "policy"),
        ] {
            do {
                _ = try Policy(json: json)
                Issue.record("\(json) should be refused")
            } catch let error as AmbitError {
                #expect(error.code == "config", "\(error)")
                #expect(error.message.contains(name), "\(error.message) should name \(name)")
            }
        }
        #expect(throws: AmbitError.self) { try Level("Read") }
        #expect(try Level("workspace") == .workspace)
        #expect(Level.read < Level.workspace && Level.none < Level.read)
    }

    @Test func unknownBuiltinIsAConfigErrorNamingIt() throws {
        let error = try #require(configError { try Agent(model: model, builtins: ["file_read", "file_reed"]) })
        #expect(error.code == "config")
        #expect(error.message.contains("file_reed"), "\(error.message)")
        #expect(try builtinToolNames.contains("shell_execute"))
    }

    @Test func theCoreRefusesAnEmptyAllowListAndAMissingDirectory() throws {
        let empty = try #require(configError { try Agent(model: model, policy: Policy(allowTools: [])) })
        #expect(empty.message.contains("allow_tools"), "\(empty.message)")
        let missing = try #require(configError {
            try Agent(model: model, policy: Policy(workingDirectory: "/no/such/ambit/dir"))
        })
        #expect(missing.message.contains("/no/such/ambit/dir"), "\(missing.message)")
    }

    @Test func withPolicyMakesANarrowedAgentAndRefusesABadPolicy() throws {
        let agent = try Agent(
            model: model, tools: [Mailer()], policy: Policy(level: .workspace), subagents: SubagentSettings())
        let empty = try #require(configError { try agent.withPolicy(Policy(level: .read, allowTools: [])) })
        #expect(empty.message.contains("allow_tools"), "\(empty.message)")
        let missing = try #require(configError {
            try agent.withPolicy(Policy(level: .read, workingDirectory: "/no/such/ambit/dir"))
        })
        #expect(missing.message.contains("/no/such/ambit/dir"), "\(missing.message)")
        let narrowed = try agent.withPolicy(Policy(level: .read))
        let status = { (a: Agent) in Dictionary(uniqueKeysWithValues: try a.listTools().map { ($0.name, $0.status) }) }
        #expect(try status(narrowed)["send_email"] == .aboveLevel)
        #expect(try status(narrowed)["agent_followup"] == .offered)
        #expect(try status(agent)["send_email"] == .offered, "the agent itself is unchanged")
    }

    @Test func listToolsShowsEffectiveLevelsStatusAndApproval() throws {
        let dir = FileManager.default.temporaryDirectory.path
        let agent = try Agent(
            model: model,
            tools: [Flagged(), Mailer(), NamedTool(name: "undeclared")],
            policy: Policy(
                level: .read, approvals: { _ in .approve }, blockTools: ["undeclared"],
                levelOverrides: ["send_email": .read], workingDirectory: dir, confineReads: true, network: .none),
            builtins: ["file_read", "file_write"]
        )
        let rows = try agent.listTools().map { "\($0.name) \($0.level) \($0.declaredLevel) \($0.status) \($0.approval)" }
        #expect(rows == [
            "get_weather read read offered true",
            "send_email read workspace offered false",
            "undeclared unrestricted unrestricted blocked false",
            "file_read read read offered false",
            "file_write workspace workspace offered true",
        ])
        let plain = try Agent(model: model, tools: [NamedTool()])
        #expect(try plain.listTools() == [
            ToolListing(name: "get_weather", level: .unrestricted, declaredLevel: .unrestricted, status: .offered, approval: false)
        ])
    }

    @Test func aPlainClosureHandlerApprovesAndAThrowOrGarbageIsADenial() async throws {
        let call = { (id: String) in #"{"id":"\#(id)","name":"send_email","arguments":{"to":"\#(id)@example.com"}}"# }
        let scenario = """
            {"name":"swift_plain_handler","wire":"openai_chat","agent":{"model":"gpt-4.1","api_key":"sk-test"},
             "tools":[],"input":"go","expect":{},
             "exchanges":[
               {"expect":{},"respond":{"tool_calls":[\(["ok", "garbage", "throws", "revised"].map(call).joined(separator: ","))],
                "usage":{"prompt_tokens":1,"completion_tokens":1}}},
               {"expect":{},"respond":{"content":"done","usage":{"prompt_tokens":1,"completion_tokens":1}}}]}
            """
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("swift_plain_handler-\(UUID()).json")
        try Data(scenario.utf8).write(to: url)
        let provider = try Provider(scenario: url)
        defer { provider.stop() }
        struct Busy: Error, LocalizedError { var errorDescription: String? { "no one is at the desk" } }
        // A plain (not async) closure.
        let policy = Policy(level: .read, approvals: { request in
            switch request.callId {
            case "ok": return .approve
            case "garbage": return .revise(argumentsJson: "{not json")
            case "throws": throw Busy()
            default: return try .revised(["to": "team@example.com"])
            }
        })
        let agent = try Agent(
            model: .openAIChat("gpt-4.1", baseURL: provider.baseURL, apiKey: "sk-test"), tools: [Mailer()], policy: policy)
        let result = try await agent.run("go")
        #expect(result.output == "done")
        let byId = Dictionary(uniqueKeysWithValues: result.toolCalls.map { ($0.id, $0) })
        #expect(byId["ok"]?.result == "sent to ok@example.com")
        #expect(byId["ok"]?.isError == false)
        #expect(byId["revised"]?.result == "sent to team@example.com")
        for id in ["garbage", "throws"] {
            let r = try #require(byId[id])
            #expect(r.isError)
            #expect(r.result.hasPrefix("Error: the call to tool 'send_email' was denied: the approval handler failed: "), "\(r.result)")
        }
        #expect(byId["garbage"]?.result.contains("not JSON") == true, "\(byId["garbage"]?.result ?? "")")
        #expect(byId["throws"]?.result.contains("no one is at the desk") == true)
    }
}

/// Writes the scenario's fixture into a fresh temporary directory T: `fixture.files` into T/ws (the
/// working directory), `fixture.outside` into T/outside (beyond the session's reach).
func writeFixture(_ scenario: [String: Any]) throws -> String? {
    guard let fixture = scenario["fixture"] as? [String: Any] else { return nil }
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-fixture-\(UUID().uuidString)")
    for (key, sub) in [("files", "ws"), ("outside", "outside")] {
        let dir = root.appendingPathComponent(sub)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, spec) in fixture[key] as? [String: [String: Any]] ?? [:] {
            let text: String
            if let t = spec["text"] as? String {
                text = t
            } else {
                text = String(
                    repeating: "\(spec["line"] as? String ?? "")\n", count: (spec["count"] as? NSNumber)?.intValue ?? 1)
            }
            let file = dir.appendingPathComponent(name)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
    }
    return root.appendingPathComponent("ws").path
}
