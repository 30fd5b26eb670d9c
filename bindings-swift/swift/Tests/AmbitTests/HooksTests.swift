// Hooks and guardrails in Swift (issue 21): the README's example, what a hook sees (the run context,
// credentials only as `[credential:alias]`), and the typed errors, a hook's text redacted. The shared
// scenario files `hooks_*` and `guardrail_*` run in ScenarioTests.

import Foundation
import Testing

@testable import Ambit

private let secret = "ghp_swiftHookValue0123456789"

/// Keeps what the hooks saw.
private actor Log {
    var seen: [String] = []
    func add(_ s: String) { seen.append(s) }
}

@Suite struct HooksTests {
    @Test func theReadmeExample() async throws {
        let agent = try Agent(
            model: .testModel([
                .toolCall("get_weather", arguments: #"{"city":"Paris"}"#), .text("Sunny."),
                .text("I cannot say."),  // the second run's request goes out beside its guardrail
            ]),
            tools: [CityWeather()],
            hooks: [
                Hook(.afterToolCall, name: "shout") { _, payload in
                    .replace((payload["result"] as? String ?? "").uppercased())
                },
                Hook(.beforeToolCall, name: "no_deletes") { _, payload in
                    payload["name"] as? String == "delete_file" ? .refuse("not today") : .proceed
                },
            ],
            inputGuardrails: [
                Guardrail(name: "no_passwords") { _, payload in
                    GuardrailVerdict(tripped: (payload["input"] as? String ?? "").contains("password"),
                                     info: ["rule": "no passwords"])
                }
            ])
        let result = try await agent.run("Weather in Paris?")
        #expect(result.toolCalls.map(\.result) == ["SUNNY IN PARIS"])
        do {
            _ = try await agent.run("What is the admin password?")
            Issue.record("the guardrail did not trip")
        } catch let AmbitError.guardrailTripped(guardrail, kind, verdictJSON, _) {
            #expect(guardrail == "no_passwords" && kind == "input")
            #expect(verdictJSON.contains("no passwords"))
        }
    }

    @Test func aHookReadsTheRunContextAndSeesCredentialsOnlyRedacted() async throws {
        let log = Log()
        let agent = try Agent(
            model: .testModel([.toolCall("deploy"), .text("Done.")]),
            tools: [Deploy()],
            credentials: Credentials().value("github", secret),
            hooks: [
                Hook(.afterToolCall, name: "audit") { ctx, payload in
                    await log.add("\(ctx.name) \(ctx.context as? String ?? "-") \(payload["result"] as? String ?? "")")
                    return .proceed
                }
            ])
        _ = try await agent.run("Deploy.", context: "ada")
        #expect(await log.seen == ["audit ada deployed with [credential:github]"])
    }

    @Test func aThrowingHookIsHookFailedNamingItWithItsTextRedacted() async throws {
        let agent = try Agent(
            model: .testModel([.toolCall("deploy"), .text("Done.")]),
            tools: [Deploy()],
            credentials: Credentials().value("github", secret),
            hooks: [Hook(.afterToolCall, name: "leaky") { _, _ in throw ToolError("rejected \(secret)") }])
        do {
            _ = try await agent.run("Deploy.")
            Issue.record("the hook did not fail the run")
        } catch let AmbitError.hookFailed(hook, point, message) {
            #expect(hook == "leaky" && point == "after_tool_call")
            #expect(message.contains("rejected [credential:github]") && !message.contains(secret), "\(message)")
        }
    }
}

/// A tool that reads its declared credential.
private struct Deploy: AmbitTool {
    let name = "deploy"
    let description = "Deploys."
    let parameters = #"{"type":"object","properties":{}}"#
    let credentials = ["github"]
    func call(arguments: [String: Any], context: TaskContext) async throws -> String {
        let token = try context.credential("github")
        return "deployed with \(token)"
    }
}
