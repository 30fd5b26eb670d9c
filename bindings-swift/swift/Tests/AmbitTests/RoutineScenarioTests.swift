// Every routine scenario file in tests/scenarios/routines/, run from Swift on SQLite and (when
// scripts/test-swift.sh found it) PostgreSQL: the same files the Rust, Python and Node suites run (see the
// README there), through the Swift facade (`Routines`, `Runner`, `RoutineDefinition`, `RoutineChanges`).
// Results are encoded back to the core's snake_case JSON and matched as the other suites match them.

import Foundation
import Testing

@testable import Ambit

private var routineScenarioDir: URL { Paths.scenarios.appendingPathComponent("routines") }

/// The routine scenario files, by name.
func routineScenarioFiles() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: routineScenarioDir.path)) ?? []
    return names.filter { $0.hasSuffix(".json") }.sorted()
}

private func scenarioStores() -> [(String, String)] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-rs-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    var out = [("sqlite", "sqlite://" + dir.appendingPathComponent("routines.db").path)]
    if let pg = Paths.postgresURL() { out.append(("postgres", pg)) }
    return out
}

/// `want` within `got`: objects by the keys given (a wanted null matches an absent key), arrays item by
/// item with the same length, anything else equal. Throws naming the path of the first difference.
private func subset(_ want: Any, _ got: Any?, _ at: String) throws {
    switch want {
    case let w as [String: Any]:
        guard let g = got as? [String: Any] else { throw ScenarioError("\(at): expected an object, got \(got ?? "nothing")") }
        for (k, v) in w { try subset(v, g[k], "\(at).\(k)") }
    case let w as [Any]:
        guard let g = got as? [Any], g.count == w.count else {
            throw ScenarioError("\(at): expected \(w.count) items, got \(got ?? "nothing")")
        }
        for (i, v) in w.enumerated() { try subset(v, g[i], "\(at)[\(i)]") }
    case is NSNull:
        if let got, !(got is NSNull) { throw ScenarioError("\(at): expected null, got \(got)") }
    default:
        guard let w = want as? NSObject, let g = got as? NSObject, w.isEqual(g) else {
            throw ScenarioError("\(at): expected \(want), got \(got ?? "nothing")")
        }
    }
}

/// A facade value as the core's snake_case JSON.
private func snake<T: Encodable>(_ value: T) throws -> Any {
    let encoder = JSONEncoder()
    encoder.keyEncodingStrategy = .convertToSnakeCase
    return try JSONSerialization.jsonObject(with: try encoder.encode(value), options: [.fragmentsAllowed])
}

/// A scenario's JSON value decoded as a facade type (snake_case keys).
private func facade<T: Decodable>(_ type: T.Type, _ value: Any) throws -> T {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    let data = try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed])
    return try decoder.decode(type, from: data)
}

/// One field of a scenario's `changes`: absent, cleared (null) or set.
private func change<T: Decodable & Encodable & Sendable>(_ changes: [String: Any], _ key: String, _: T.Type) throws -> Change<T>? {
    guard let value = changes[key] else { return nil }
    if value is NSNull { return .clear }
    return .set(try facade(T.self, value))
}

private func routineChanges(_ c: [String: Any]) throws -> RoutineChanges {
    let known: Set = ["agent", "instructions", "title", "interval_seconds", "cron_expression", "timezone",
                      "active_window", "enabled", "parallel_limit", "catch_up", "daily_cap", "model"]
    if let unknown = c.keys.first(where: { !known.contains($0) }) { throw ScenarioError("unknown change \(unknown)") }
    return RoutineChanges(
        agent: try change(c, "agent", String.self), instructions: try change(c, "instructions", String.self),
        title: try change(c, "title", String.self), intervalSeconds: try change(c, "interval_seconds", Int64.self),
        cronExpression: try change(c, "cron_expression", String.self), timezone: try change(c, "timezone", String.self),
        activeWindow: try change(c, "active_window", ActiveWindow.self), enabled: try change(c, "enabled", Bool.self),
        parallelLimit: try change(c, "parallel_limit", Int64.self), catchUp: try change(c, "catch_up", Int64.self),
        dailyCap: try change(c, "daily_cap", Int64.self), model: try change(c, "model", String.self))
}

/// `interval_seconds` as `intervalSeconds`: how the Swift facade names a refused field.
private func lowerCamelField(_ name: String) -> String {
    let parts = name.split(separator: "_")
    guard let first = parts.first else { return name }
    return ([String(first)] + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }).joined()
}

/// Runs one file's steps against a store; throws at the first step whose result or error differs.
private func runRoutineScenario(_ scenario: [String: Any], url: String, baseURL: String, suffix: String) async throws {
    let spec = try #require(scenario["routine"] as? [String: Any])
    let clock = try TestingClock(startMs: try #require(int(spec["clock_ms"])).int64)
    let routines = Routines(core: try await testingOpenRoutines(url: url, clock: clock))
    let sessions = Sessions(core: try await testingOpenSessions(
        url: url, contextWindow: nil, compactAt: 0.85, keepRecent: 2, clock: clock))
    let ledger = (spec["ledger"] as? Bool) == true ? Ledger(core: try await testingOpenLedger(url: url, clock: clock)) : nil
    var model = Model.openAIChat("m", baseURL: baseURL)
    model.maxRetries = 0
    let runner = try Runner(routines: routines, sessions: sessions, agents: [
        "scenario\(suffix)": { ctx in try Agent(model: model, ledger: ctx.tools) },
    ], leaseMs: 3_600_000, ledger: ledger)
    for (i, step) in try #require(spec["steps"] as? [[String: Any]]).enumerated() {
        let op = step["op"] as? String ?? ""
        let at = "step \(i) (\(op))"
        let id = "\(step["id"] as? String ?? "")\(suffix)"
        let actor = step["actor"] as? String ?? "scenario"
        let got: Any
        do {
            switch op {
            case "clock":
                let to = try #require(int(step["at"])).int64
                _ = try clock.advance(ms: max(0, to - (try clock.nowMs())))
                continue
            case "create":
                var definition = try #require(step["definition"] as? [String: Any])
                for key in ["id", "agent"] { if let v = definition[key] as? String { definition[key] = v + suffix } }
                got = try snake(try await routines.create(try facade(RoutineDefinition.self, definition), actor: actor))
            case "update":
                let changes = try routineChanges(try #require(step["changes"] as? [String: Any]))
                got = try snake(try await routines.update(id, changes, actor: actor))
            case "get":
                got = try snake(try await routines.get(id))
            case "delete":
                try await routines.delete(id, actor: actor)
                got = NSNull()
            case "revisions":
                got = try snake(try await routines.revisions(id))
            case "runs":
                let runs = try await routines.runs(routineId: id).sorted {
                    ($0.startedAt, $0.kind) < ($1.startedAt, $1.kind)
                }
                got = try snake(runs)
            case "skipped":
                got = try snake(try await routines.skipped(routineId: id))
            case "tick":
                let to = try #require(int(step["at"])).int64
                _ = try clock.advance(ms: max(0, to - (try clock.nowMs())))
                got = try snake(try await runner.tick(now: to))
                // The runs it started end before the next step.
                try await runner.waitIdle()
            default:
                throw ScenarioError("\(at): unknown op \(op)")
            }
        } catch let e as RoutineError {
            guard let want = step["error"] as? [String: Any] else { throw ScenarioError("\(at): \(e)") }
            var wanted = want
            if let field = want["field"] as? String { wanted["field"] = lowerCamelField(field) }
            try subset(wanted, ["code": e.code, "field": e.field ?? NSNull()] as [String: Any], at)
            continue
        }
        if let error = step["error"] { throw ScenarioError("\(at): expected the error \(error), got \(got)") }
        if let expect = step["expect"] { try subset(expect, got, at) }
    }
}

private extension Int {
    var int64: Int64 { Int64(self) }
}

private func loadScenario(_ url: URL) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
}

@Suite(.serialized) struct RoutineScenarioTests {
    @Test(arguments: routineScenarioFiles())
    func routineScenario(_ file: String) async throws {
        let path = routineScenarioDir.appendingPathComponent(file)
        let scenario = try loadScenario(path)
        for (store, url) in scenarioStores() {
            let provider = try Provider(scenario: path)
            defer { provider.stop() }
            do {
                try await runRoutineScenario(scenario, url: url, baseURL: provider.baseURL,
                                             suffix: "-" + UUID().uuidString.prefix(12).lowercased())
            } catch {
                Issue.record("\(file) on \(store): \(error)")
                continue
            }
            try await provider.check(scenario, "\(file) on \(store)")
        }
    }

    @Test func theFilesAreFound() {
        #expect(routineScenarioFiles().count >= 6, "no routine scenario files at \(routineScenarioDir.path)")
    }

    /// The negative control: every file that starts a run, with its first such tick a millisecond early,
    /// fails.
    @Test func aTickAMillisecondEarlyFailsTheFilesThatRunSlots() async throws {
        var caught = 0
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-rs-neg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for file in routineScenarioFiles() {
            var scenario = try loadScenario(routineScenarioDir.appendingPathComponent(file))
            var spec = try #require(scenario["routine"] as? [String: Any])
            var steps = try #require(spec["steps"] as? [[String: Any]])
            guard let i = steps.firstIndex(where: {
                ($0["op"] as? String) == "tick"
                    && ((($0["expect"] as? [String: Any])?["started"] as? [Any])?.isEmpty == false)
            }) else { continue }
            steps[i]["at"] = try #require(int(steps[i]["at"])) - 1
            spec["steps"] = steps
            scenario["routine"] = spec
            let moved = dir.appendingPathComponent(file)
            try JSONSerialization.data(withJSONObject: scenario).write(to: moved)
            let provider = try Provider(scenario: moved)
            defer { provider.stop() }
            let url = "sqlite://" + dir.appendingPathComponent("\(file).db").path
            await #expect(throws: ScenarioError.self, "\(file): a tick a millisecond early passed") {
                try await runRoutineScenario(scenario, url: url, baseURL: provider.baseURL, suffix: "-neg")
            }
            caught += 1
        }
        #expect(caught >= 5, "only \(caught) files ran slots")
    }
}
