// Routines from Swift (SPEC §13): definitions with revisions credited to actors, every validation error
// as RoutineError.invalid naming its field (lowerCamelCase), and a Runner whose agent factory is a Swift
// closure, on SQLite and (when scripts/test-swift.sh started it) PostgreSQL. The core's own suite runs
// the multi-process guarantees on both stores.

import Foundation
import Testing

@testable import Ambit

private func routineStores() -> [(String, String)] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-routines-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    var out = [("sqlite", "sqlite://" + dir.appendingPathComponent("routines.db").path)]
    if let pg = Paths.postgresURL() { out.append(("postgres", pg)) }
    return out
}

private func routineProvider(_ name: String, _ exchanges: [[String: Any]]) throws -> Provider {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString).json")
    let data = try JSONSerialization.data(withJSONObject: ["name": name, "exchanges": exchanges])
    try data.write(to: file)
    return try Provider(scenario: file)
}

/// An agent name of this test's own, so the shared PostgreSQL database serves.
private func freshAgent() -> String { "swift-" + UUID().uuidString.prefix(8).lowercased() }

/// The contexts a factory was given.
private actor Seen {
    var contexts: [RunContext] = []
    func add(_ c: RunContext) { contexts.append(c) }
}

@Suite(.serialized) struct RoutineTests {
    @Test func definitionsRevisionsAndEveryValidationErrorByFieldName() async throws {
        for (store, url) in routineStores() {
            let routines = try await Routines.open(url)
            let agent = freshAgent()
            let r = try await routines.create(
                RoutineDefinition(agent: agent, instructions: "Chase POs.", title: "POs", intervalSeconds: 1800,
                                  dailyCap: 5), actor: "alice")
            #expect(r.revision == 1 && r.catchUp == 1 && r.nextSlot == r.createdAt, "\(store)")
            let r2 = try await routines.update(
                r.id, RoutineChanges(instructions: .set("Chase the five oldest POs."), title: .clear), actor: "bob")
            #expect(r2.revision == 2 && r2.title == nil && r2.nextSlot == r.nextSlot, "rewording keeps the slot")
            let r3 = try await routines.update(
                r.id, RoutineChanges(cronExpression: .set("0 9 * * 1-5"), timezone: .set("Europe/Paris")),
                actor: "carol")
            #expect(r3.intervalSeconds == nil && r3.nextSlot != r.nextSlot, "a schedule change reschedules")
            let got = try await routines.get(r.id)
            #expect(got.revisions?.map { "\($0.revision)\($0.actor)" } == ["1alice", "2bob", "3carol"])
            #expect(got.revisions?.first?.definition.instructions == "Chase POs.")
            #expect(try await routines.list(agent: agent).map(\.id) == [r.id])

            let base = RoutineDefinition(agent: agent, instructions: "go", intervalSeconds: 60)
            var cron = base
            cron.intervalSeconds = nil
            cron.cronExpression = "61 * * * *"
            var zone = base
            zone.intervalSeconds = nil
            zone.cronExpression = "0 9 * * *"
            zone.timezone = "Mars/Base"
            var zero = base
            zero.intervalSeconds = 0
            var window = base
            window.activeWindow = ActiveWindow(weekdays: ["mon"], start: "17:00", end: "09:00", timezone: "UTC")
            var cap = base
            cap.dailyCap = -1
            var parallel = base
            parallel.parallelLimit = 0
            var catchUp = base
            catchUp.catchUp = 0
            let cases: [(RoutineDefinition, String)] = [
                (cron, "cronExpression"), (zone, "timezone"), (zero, "intervalSeconds"), (window, "activeWindow"),
                (cap, "dailyCap"), (parallel, "parallelLimit"), (catchUp, "catchUp"),
            ]
            for (definition, field) in cases {
                do {
                    _ = try await routines.create(definition, actor: "alice")
                    Issue.record("\(field): accepted")
                } catch let e as RoutineError {
                    #expect(e.field == field, "\(e)")
                    #expect(e.code == "invalid_argument")
                }
            }
            do {
                _ = try await routines.update(r.id, RoutineChanges(agent: .set("someone-else")), actor: "bob")
                Issue.record("the agent changed")
            } catch let e as RoutineError {
                #expect(e.field == "agent")
            }
            try await routines.delete(r.id, actor: "dave")
            await #expect(throws: RoutineError.self) { _ = try await routines.get(r.id) }
            #expect(try await routines.revisions(r.id).map(\.change) == ["create", "update", "update", "delete"])
        }
    }

    @Test func aRunnerRunsASwiftAgentAndRecordsItsOutcome() async throws {
        for (store, url) in routineStores() {
            let p = try routineProvider("swift_routine", [
                ["expect": ["tool_names": ["report_outcome", "list_my_routines", "list_my_outcomes"]],
                 "respond": ["tool_calls": [["id": "r", "name": "report_outcome",
                                             "arguments": ["status": "nothing_to_do", "summary": "No PO lacked tracking."]]]]],
                ["respond": ["content": "Done."]],
            ])
            defer { p.stop() }
            let routines = try await Routines.open(url)
            let sessions = try await Sessions.open(url)
            let name = freshAgent()
            let r = try await routines.create(
                RoutineDefinition(agent: name, instructions: "Chase POs.", intervalSeconds: 3600), actor: "alice")
            let seen = Seen()
            let model = Model.openAIChat("m", baseURL: p.baseURL)
            let runner = try Runner(routines: routines, sessions: sessions, agents: [
                name: { ctx in
                    await seen.add(ctx)
                    return try Agent(model: model, ledger: ctx.tools)
                },
            ], leaseMs: 30_000)
            let report = try await runner.tick(now: r.createdAt)
            #expect(report.started.map(\.routineId) == [r.id], "\(store)")
            try await runner.waitIdle()
            let contexts = await seen.contexts
            #expect(contexts.first?.routine.id == r.id && contexts.first?.run.slotAt == r.createdAt)
            let runs = try await routines.runs(routineId: r.id)
            #expect(runs.map(\.state) == ["finished"] && runs.first?.outcome == "nothing_to_do", "\(store)")
            let runnerId = try runner.id
            #expect(runs.first?.summary == "No PO lacked tracking." && runs.first?.runner == runnerId)
            #expect(try await runner.tick(now: r.createdAt).started.isEmpty, "the slot ran once")
        }
    }

    @Test func aParkedRunResumedThroughSessionsLeavesParked() async throws {
        for (store, url) in routineStores() {
            let p = try routineProvider("swift_routine_park", [
                ["respond": ["tool_calls": [["id": "e", "name": "escalate_to_human",
                                             "arguments": ["question": "Go ahead?"]]]]],
                ["respond": ["content": "Went ahead."]],
            ])
            defer { p.stop() }
            let routines = try await Routines.open(url)
            let sessions = try await Sessions.open(url)
            let name = freshAgent()
            let model = Model.openAIChat("m", baseURL: p.baseURL)
            let runner = try Runner(routines: routines, sessions: sessions, agents: [
                name: { ctx in
                    try Agent(model: model, policy: Policy(level: .unrestricted, approvals: { _ in .later }),
                              builtins: ["escalate_to_human"], ledger: ctx.tools)
                },
            ])
            let r = try await routines.create(
                RoutineDefinition(agent: name, instructions: "Ask first.", intervalSeconds: 3600), actor: "a")
            _ = try await runner.tick(now: r.createdAt)
            try await runner.waitIdle()
            let parked = try #require(try await routines.runs(routineId: r.id).first)
            #expect(parked.state == "parked", "\(store)")
            let answered = try await sessions.resume(
                try Agent(model: model, builtins: ["escalate_to_human"]), sessionId: parked.sessionId,
                decision: .approve)
            #expect(answered.output == "Went ahead.")
            let report = try await runner.tick(now: r.createdAt + 1)
            #expect(report.resumed.map(\.id) == [parked.id], "\(store)")
            #expect(try await routines.run(parked.id)?.state == "finished")
        }
    }

    @Test func runnerOptionsAreCheckedByName() async throws {
        let (_, url) = routineStores()[0]
        let routines = try await Routines.open(url)
        let sessions = try await Sessions.open(url)
        #expect(throws: RoutineError.invalid(field: "leaseMs", message: "invalid leaseMs: must be milliseconds >= 0, got -5")) {
            _ = try Runner(routines: routines, sessions: sessions, agents: [:], leaseMs: -5)
        }
        do {
            _ = try Runner(routines: routines, sessions: sessions, agents: [:], id: "bad id\n")
            Issue.record("a bad id was accepted")
        } catch let e as RoutineError {
            #expect(e.field == "id")
        }
        do {
            _ = try await Routines.open("mysql://x")
            Issue.record("a bad URL was accepted")
        } catch let e as RoutineError {
            #expect(e.field == "url")
        }
    }
}
