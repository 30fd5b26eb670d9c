// Runs every scenario of tests/scenarios (the files the Rust, Python and Node suites run) against the
// loopback provider, one test case per file. scripts/test-swift.sh copies the scenarios and the provider
// into .artifacts/; AMBIT_SCENARIOS_DIR and AMBIT_PROVIDER override the locations.

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

@testable import Ambit

enum Paths {
    static let packageDir = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var scenarios: URL {
        if let dir = ProcessInfo.processInfo.environment["AMBIT_SCENARIOS_DIR"] { return URL(fileURLWithPath: dir) }
        return packageDir.appendingPathComponent(".artifacts/scenarios")
    }

    /// The streamable-HTTP URL of a scenario's MCP server (`everything`, `dynamic`), started on the host by
    /// scripts/test-swift.sh (the root shares the host's network); AMBIT_MCP_EVERYTHING_URL overrides
    /// server-everything's.
    static func mcpURL(_ server: String) throws -> String {
        if server == "everything", let url = ProcessInfo.processInfo.environment["AMBIT_MCP_EVERYTHING_URL"] {
            return url
        }
        let file = packageDir.appendingPathComponent(".artifacts/mcp/\(server).url")
        return try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The PostgreSQL server scripts/test.sh starts (the root shares the host's network): its URL from
    /// AMBIT_TEST_POSTGRES_URL, or from .artifacts/postgres.url, which scripts/test-swift.sh writes.
    static func postgresURL() -> String? {
        if let url = ProcessInfo.processInfo.environment["AMBIT_TEST_POSTGRES_URL"], !url.isEmpty { return url }
        let file = packageDir.appendingPathComponent(".artifacts/postgres.url")
        let url = (try? String(contentsOf: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return url?.isEmpty == false ? url : nil
    }

    static var provider: URL {
        if let bin = ProcessInfo.processInfo.environment["AMBIT_PROVIDER"] { return URL(fileURLWithPath: bin) }
        return packageDir.appendingPathComponent(".artifacts/bin/ambit-provider")
    }
}

/// The scenario files, by name: discovered, so a new file is a new test case.
func scenarioFiles() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: Paths.scenarios.path)) ?? []
    return names.filter { $0.hasSuffix(".json") }.sorted()
}

/// A scenario's `context`, as the Swift value this suite passes to each run.
struct ScenarioContext: Sendable {
    let data: [String: String]

    init?(_ scenario: [String: Any]) {
        guard let fields = scenario["context"] as? [String: Any] else { return nil }
        data = fields.mapValues { "\($0)" }
    }
}

/// A run's input in a scenario: its text, a history in the core's JSON (a file's `messages`, which may
/// be bad on purpose), or typed messages (an earlier result's and a new user message: `history`).
enum RunInput {
    case text(String)
    case json(String)
    case messages([Message])

    /// What `run_started` reports: the text, or the history's last user message.
    var summary: String {
        switch self {
        case let .text(t): return t
        case .json: return ""
        case let .messages(m):
            for message in m.reversed() { if case let .user(content) = message { return content } }
            return ""
        }
    }

    var text: String {
        if case let .text(t) = self { return t }
        return ""
    }

    /// A step's (or the file's) input: `messages`, `history` after `previous`, or `input`.
    init(_ step: [String: Any], previous: RunResult?) throws {
        if let messages = step["messages"] {
            self = .json(try jsonText(messages))
        } else if step["history"] as? Bool == true, let previous {
            self = .messages(previous.messages + [.user(step["input"] as? String ?? "")])
        } else {
            self = .text(step["input"] as? String ?? "")
        }
    }
}

extension Agent {
    /// Runs `input` with `context`, as the scenario says.
    func run(_ input: RunInput, _ context: ScenarioContext?) async throws -> RunResult {
        switch input {
        case let .text(t):
            if let context { return try await run(t, context: context) }
            return try await run(t)
        case let .json(j): return try await run(messagesJSON: j, context: context)
        case let .messages(m): return try await run(messages: m, context: context)
        }
    }

    func stream(_ input: RunInput, _ context: ScenarioContext?) -> AsyncThrowingStream<AgentEvent, any Error> {
        switch input {
        case let .text(t):
            if let context { return stream(t, context: context) }
            return stream(t)
        case let .json(j): return stream(messagesJSON: j, context: context)
        case let .messages(m): return stream(messages: m, context: context)
        }
    }
}

struct ScenarioError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The loopback provider serving one scenario file.
final class Provider {
    let process = Process()
    let stdin = Pipe()
    let stdout = Pipe()
    let baseURL: String

    /// `vars`: values for `{{name}}` in the scenario's expectations.
    init(scenario: URL, vars: [String: String] = [:]) throws {
        process.executableURL = Paths.provider
        process.arguments = ["--exit-on-eof"] + vars.sorted { $0.key < $1.key }.flatMap { ["--var", "\($0.key)=\($0.value)"] }
            + [scenario.path]
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        // The first stdout line is the base URL.
        var line = Data()
        let reader = stdout.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let first = text.split(separator: "\n").first, first.hasPrefix("http") else {
            process.terminate()
            throw ScenarioError("the provider printed no base URL: \(text.debugDescription)")
        }
        baseURL = String(first).trimmingCharacters(in: .whitespaces)
    }

    /// `GET /__ambit/state`: what the provider served, its mismatches, the requests abandoned.
    func state() async throws -> [String: Any] {
        let url = try #require(URL(string: baseURL.replacingOccurrences(of: "/v1", with: "") + "/__ambit/state"))
        let data: Data = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: url) { data, _, error in
                if let data { continuation.resume(returning: data) } else {
                    continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
                }
            }.resume()
        }
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Every scripted exchange was used and none mismatched; `expect.abandoned`: the requests whose
    /// client hung up before the answer (polled for a while: the hang-up may reach the provider after the
    /// run ends).
    func check(_ scenario: [String: Any], _ file: String) async throws {
        let want = ((scenario["expect"] as? [String: Any])?["abandoned"] as? [Any])?.compactMap(int)
        var state = try await self.state()
        var abandoned: [Int] { (state["abandoned"] as? [Any] ?? []).compactMap(int) }
        for _ in 0..<1000 {
            guard let want, abandoned.count < want.count else { break }
            try await Task.sleep(nanoseconds: 10_000_000)
            state = try await self.state()
        }
        if let want { #expect(abandoned == want, "\(file): abandoned requests") }
        #expect((state["mismatches"] as? [Any])?.isEmpty == true, "\(file): provider mismatches \(state["mismatches"] ?? "")")
        #expect(int(state["remaining"]) == 0, "\(file): scripted exchanges left unused (served \(state["served"] ?? ""))")
        // `absent_from_requests`: texts no request holds (a run context never reaches the model).
        for text in (scenario["expect"] as? [String: Any])?["absent_from_requests"] as? [String] ?? [] {
            for (n, request) in (state["requests"] as? [[String: Any]] ?? []).enumerated() {
                let body = try jsonText(request["body"] ?? NSNull())
                #expect(!body.contains(text), "\(file): request \(n + 1) holds \(text)")
            }
        }
    }

    func stop() {
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// One run of a file's own: its `oauth` servers' URLs by name (started through the launcher
/// scripts/test-swift.sh runs), a directory (token files), and `rebuild` (a step's `new_agent`).
final class RunOwn: @unchecked Sendable {
    var oauth: [String: String] = [:]
    let dir: URL = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-run-" + UUID().uuidString)
    var rebuild: (() async throws -> Agent)? = nil
}

/// POSTs `body` (JSON) to `url` and answers the JSON object it gets back.
func postJSON(_ url: String, _ body: [String: Any]) async throws -> [String: Any] {
    var request = URLRequest(url: try #require(URL(string: url)))
    request.httpMethod = "POST"
    request.httpBody = try JSONSerialization.data(withJSONObject: body)
    request.setValue("application/json", forHTTPHeaderField: "content-type")
    let data: Data = try await withCheckedThrowingContinuation { continuation in
        URLSession.shared.dataTask(with: request) { data, _, error in
            if let data { continuation.resume(returning: data) } else {
                continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
            }
        }.resume()
    }
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(url): not a JSON object")
}

/// GETs `url` (following redirects) and answers the body's text.
func getText(_ url: String) async throws -> String {
    let target = try #require(URL(string: url), "not a URL: \(url)")
    return try await withCheckedThrowingContinuation { continuation in
        URLSession.shared.dataTask(with: target) { data, _, error in
            if let data { continuation.resume(returning: String(decoding: data, as: UTF8.self)) } else {
                continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
            }
        }.resume()
    }
}

/// The MCP URL of the run's `oauth` server `name`: a fresh tests/mcp/oauth_server.py with `args`, started
/// the first time through the launcher on the host (the root has no Python).
func oauthServer(_ at: LedgerAt, _ name: String, _ args: [String]) async throws -> String {
    if let url = at.run.oauth[name] { return url }
    let answer = try await postJSON(try Paths.mcpURL("oauth-launcher") + "/start", ["args": args])
    let url = try #require(answer["url"] as? String, "the launcher answered \(answer)")
    at.run.oauth[name] = url
    return url
}

/// The user's consent, headless: the authorization URL fetched with a plain HTTP client, which follows the
/// redirect to the test server's own `/callback` (the redirect URI here), whose body is the URL it was
/// reached at: the redirect, handed back. The server approves at once, or denies when the URL carries
/// `consent=deny`.
func headlessConsent(deny: Bool) -> @Sendable (String) async throws -> String {
    { url in try await getText(deny ? url + "&consent=deny" : url) }
}

/// A server's `oauth` field as `McpOAuth`: `token_store` `file` a token file in the run's directory (shared
/// by every agent of the run), `memory` (default) none; the headless consent.
func scenarioOAuth(_ o: [String: Any], _ name: String, _ url: String, _ at: LedgerAt) throws -> McpOAuth {
    let store = o["token_store"] as? String ?? "memory"
    let consent = o["consent"] as? String ?? "approve"
    guard ["memory", "file"].contains(store), ["approve", "deny"].contains(consent) else {
        throw ScenarioError("oauth: token_store \(store), consent \(consent)")
    }
    var tokenFile: String? = nil
    if store == "file" {
        try FileManager.default.createDirectory(at: at.run.dir, withIntermediateDirectories: true)
        tokenFile = at.run.dir.appendingPathComponent("tokens-\(name).json").path
    }
    let scopes = o["scopes"] as? [String] ?? []
    if o["grant"] as? String == "client_credentials" {
        return .clientCredentials(
            clientId: o["client_id"] as? String ?? "", clientSecret: o["client_secret"] as? String ?? "",
            scopes: scopes, tokenFile: tokenFile)
    }
    return .authorizationCode(
        redirectUri: String(url.dropLast("/mcp".count)) + "/callback", clientName: o["client_name"] as? String,
        scopes: scopes, tokenFile: tokenFile, onAuthorize: headlessConsent(deny: consent == "deny"))
}

/// `expect.oauth_stats`: each `oauth` server's counters (`GET /stats`), the keys named, equal.
func checkOAuthStats(_ scenario: [String: Any], _ at: LedgerAt, _ file: String) async throws {
    let want = (scenario["expect"] as? [String: Any])?["oauth_stats"] as? [String: [String: Any]] ?? [:]
    for (name, counters) in want {
        let url = try #require(at.run.oauth[name], "\(file): oauth_stats: no oauth server '\(name)' was started")
        let text = try await getText(String(url.dropLast("/mcp".count)) + "/stats")
        let stats = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        for (key, value) in counters {
            #expect(jsonEqual(stats[key] as Any, value), "\(file): oauth_stats.\(name).\(key): \(text)")
        }
    }
}

/// A ledger store: its URL (a fresh SQLite file, or the shared PostgreSQL database), the suffix a
/// scenario's scope, routine id and run id get there (none on SQLite; unique on PostgreSQL), and the
/// manual clock (the test hook) of a scenario with `ledger.clock_ms` (nil: the system clock).
struct LedgerAt {
    let store: String
    let url: String
    let suffix: String
    var clock: TestingClock? = nil
    /// What one run of a file has of its own besides the ledger (its `oauth` servers, token files).
    let run = RunOwn()

    static func sqlite() -> LedgerAt { LedgerAt(store: "sqlite", url: ledgerURL(), suffix: "") }

    /// SQLite; and, for a scenario with a `ledger`, PostgreSQL when scripts/test.sh started one; each
    /// with a clock of its own when the scenario asks for one.
    static func stores(_ scenario: [String: Any]) throws -> [LedgerAt] {
        var out = [sqlite()]
        if scenario["ledger"] != nil, let url = Paths.postgresURL() {
            out.append(LedgerAt(store: "postgres", url: url, suffix: "-" + UUID().uuidString.prefix(18).lowercased()))
        }
        if let start = ((scenario["ledger"] as? [String: Any])?["clock_ms"] as? NSNumber)?.int64Value {
            for i in out.indices { out[i].clock = try TestingClock(startMs: start) }
        }
        return out
    }

    /// The ledger at this store, on its manual clock when it has one.
    func open() async throws -> Ledger {
        guard let clock else { return try await Ledger.open(url) }
        return Ledger(core: try await testingOpenLedger(url: url, clock: clock))
    }

    /// `{{scope}}` and `{{routine_id}}` for the provider: the ledger's, as this store has them.
    func vars(_ scenario: [String: Any]) -> [String: String] {
        let ledger = scenario["ledger"] as? [String: Any] ?? [:]
        var out: [String: String] = [:]
        for key in ["scope", "routine_id"] {
            if let value = ledger[key] as? String { out[key] = value + suffix }
        }
        return out
    }
}

/// The `until_cancelled` tools that saw their task's cancellation token, by the tag of their run (the
/// tests run in parallel, so each run takes only its own records).
final class SawCancel: @unchecked Sendable {
    static let shared = SawCancel()
    private let lock = NSLock()
    private var tags: [String] = []

    func record(_ tag: String) {
        lock.lock()
        tags.append(tag)
        lock.unlock()
    }

    private func drain(_ tag: String) -> Int {
        lock.lock()
        defer { lock.unlock() }
        let before = tags.count
        tags.removeAll { $0 == tag }
        return before - tags.count
    }

    /// Waits up to 5 s for a record of the run tagged `tag`, then takes them all.
    func take(_ tag: String) async -> Int {
        for _ in 0..<500 {
            let got = drain(tag)
            if got > 0 { return got }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return 0
    }
}

/// What `waits_for_release` tools wait on, by the tag of their run: opened by a session step's `release`.
actor Releases {
    static let shared = Releases()
    private var opened: Set<String> = []
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    func wait(_ tag: String) async {
        if opened.contains(tag) { return }
        await withCheckedContinuation { waiting[tag, default: []].append($0) }
    }

    func open(_ tag: String) {
        opened.insert(tag)
        for c in waiting.removeValue(forKey: tag) ?? [] { c.resume() }
    }
}

/// A scenario tool: `returns` (with `{arg}` substitution) or `raises`.
struct ScenarioTool: AmbitTool {
    let name: String
    let description: String
    let parameters: String
    let returns: String?
    let raises: String?
    /// `returns_image`: the text (`text`), then the image (`media_type`, `data` in base64).
    var returnsImage: [String: String]? = nil
    /// `repeat`: how many times the image comes after the text.
    var imageRepeat = 1
    var level: Level = .unrestricted
    var requiresApproval = false
    var allowBlank: [String] = []
    /// A slow job (a background task the scenario cancels).
    var sleepsMs: Int? = nil
    /// `until_cancelled`: report this progress note, then wait on the cancellation token.
    var untilCancelled: String? = nil
    /// The tag of the run the tool belongs to (what it records in `SawCancel`).
    var tag = ""
    /// `waits_for_release`: report this progress note (if any), then hold until the suite releases the
    /// run's tools (after the run that started it ended).
    var waitsForRelease: String? = nil
    /// The credential aliases declared: `{credential:alias}` in the behavior is read from the context.
    var credentials: [String] = []

    func call(arguments: [String: Any], context: TaskContext) async throws -> String {
        var returns = returns
        var raises = raises
        for alias in credentials {
            let value = try context.credential(alias)
            returns = returns?.replacingOccurrences(of: "{credential:\(alias)}", with: value)
            raises = raises?.replacingOccurrences(of: "{credential:\(alias)}", with: value)
        }
        // `{context:key}`: the run context's field.
        if returns?.contains("{context:") == true {
            guard let run = context.context as? ScenarioContext else { throw ToolError("the run has no context") }
            for (key, value) in run.data { returns = returns?.replacingOccurrences(of: "{context:\(key)}", with: value) }
        }
        if let note = waitsForRelease {
            if !note.isEmpty { context.progress(substitute(note, arguments)) }
            await Releases.shared.wait(tag)
        }
        if let note = untilCancelled {
            context.progress(substitute(note, arguments))
            for _ in 0..<2000 {
                if context.isCancelled {
                    SawCancel.shared.record(tag)
                    return "stopped"
                }
                // A cancelled task also cancels this Swift Task: the sleep throws CancellationError.
                do {
                    try await Task.sleep(nanoseconds: 10_000_000)
                } catch is CancellationError {
                    SawCancel.shared.record(tag)
                    throw CancellationError()
                }
            }
        }
        if let sleepsMs { try await Task.sleep(nanoseconds: UInt64(sleepsMs) * 1_000_000) }
        if let image = returnsImage {
            let data = Data(base64Encoded: image["data"] ?? "") ?? Data()
            let images = [Part](repeating: .image(data, mediaType: image["media_type"]), count: imageRepeat)
            return toolContent([.text(substitute(image["text"] ?? "", arguments))] + images)
        }
        if let raises { throw ToolError(substitute(raises, arguments)) }
        return substitute(returns ?? "", arguments)
    }

    func substitute(_ template: String, _ arguments: [String: Any]) -> String {
        var text = template
        for (key, value) in arguments {
            let replacement: String
            if let s = value as? String {
                replacement = s
            } else if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]) {
                replacement = String(decoding: data, as: UTF8.self)
            } else {
                replacement = "\(value)"
            }
            text = text.replacingOccurrences(of: "{\(key)}", with: replacement)
        }
        return text
    }
}

/// The scenario's `mcp_servers` and `deferral`; `server` names a real server, reached here over
/// streamable HTTP on 127.0.0.1.
/// A scenario's `hooks`, each behaving as tests/scenarios/README.md says (an `async` one yields once
/// before it answers).
func scenarioHooks(_ scenario: [String: Any]) throws -> [Hook] {
    try (scenario["hooks"] as? [[String: Any]] ?? []).map { h in
        let point = try #require(HookPoint(rawValue: h["point"] as? String ?? ""), "a hook point: \(h)")
        let behavior = try jsonText(h["behavior"] ?? [String: Any]())
        let yields = h["async"] as? Bool ?? false
        return Hook(point, name: h["name"] as? String ?? "") { ctx, payload in
            if yields { await Task.yield() }
            let b = (try? JSONSerialization.jsonObject(with: Data(behavior.utf8))) as? [String: Any] ?? [:]
            let result = payload["result"] as? String ?? ""
            if let message = b["raises"] as? String { throw ToolError(message) }
            if b["uppercase_result"] as? Bool == true { return .replace(result.uppercased()) }
            if let key = b["append_context"] as? String {
                guard let run = ctx.context as? ScenarioContext else { throw ToolError("the run has no context") }
                return .replace(result + " [" + (run.data[key] ?? "") + "]")
            }
            if let reason = b["refuse"] as? String { return .refuse(reason) }
            if let arguments = b["set_arguments"] { return .replace(arguments) }
            if let text = b["append_instructions"] as? String {
                return .replace(["instructions": (payload["instructions"] as? String ?? "") + text])
            }
            if let text = b["set_preamble"] as? String {
                let calls = payload["tool_calls"] as? [Any] ?? []
                return calls.isEmpty ? .proceed : .replace(["text": text])
            }
            return .proceed
        }
    }
}

/// A scenario's `input_guardrails` or `output_guardrails` (`key`): `trips_on` a word of the payload's
/// `input` or `output`, case-insensitively, or `raises`.
func scenarioGuardrails(_ scenario: [String: Any], _ key: String, reads field: String) throws -> [Guardrail] {
    try (scenario[key] as? [[String: Any]] ?? []).map { g in
        let behavior = try jsonText(g["behavior"] ?? [String: Any]())
        let yields = g["async"] as? Bool ?? false
        return Guardrail(name: g["name"] as? String ?? "") { _, payload in
            if yields { await Task.yield() }
            let b = (try? JSONSerialization.jsonObject(with: Data(behavior.utf8))) as? [String: Any] ?? [:]
            if let message = b["raises"] as? String { throw ToolError(message) }
            if let word = b["trips_on"] as? String,
                (payload[field] as? String ?? "").lowercased().contains(word.lowercased())
            {
                return GuardrailVerdict(tripped: true, info: ["matched": word])
            }
            return .pass
        }
    }
}

func scenarioTooling(_ scenario: [String: Any], _ at: LedgerAt) async throws -> ([McpServer], Deferral?) {
    var servers: [McpServer] = []
    for s in scenario["mcp_servers"] as? [[String: Any]] ?? [] {
        let name = s["name"] as? String ?? ""
        let trusted = s["trusted"] as? Bool ?? false
        let levels = try (s["levels"] as? [String: String] ?? [:]).mapValues { try Level($0) }
        let deferral = (s["deferral"] as? String).flatMap(DeferralSetting.init(rawValue:))
        let eager = s["eager_load_tools"] as? [String] ?? []
        switch s["server"] as? String {
        case "oauth":
            // tests/mcp/oauth_server.py with the scenario's flags, one per run of the file.
            let url = try await oauthServer(at, name, s["server_args"] as? [String] ?? [])
            let oauth = try scenarioOAuth(s["oauth"] as? [String: Any] ?? [:], name, url, at)
            servers.append(
                .http(name, url: url, trusted: trusted, levels: levels, deferral: deferral, eagerLoadTools: eager,
                      oauth: oauth))
        case "everything", "dynamic":
            // server-everything, or tests/mcp/dynamic_server.py (--per-session: each run's session sees
            // only the tools it added), both started on the host by scripts/test-swift.sh.
            let url = try Paths.mcpURL(s["server"] as? String ?? "")
            servers.append(
                .http(name, url: url, trusted: trusted, levels: levels, deferral: deferral, eagerLoadTools: eager))
        case "unavailable":
            // A server whose command does not exist.
            servers.append(
                .stdio(
                    name, command: "/nonexistent/ambit-mcp-server", trusted: trusted, levels: levels,
                    deferral: deferral, eagerLoadTools: eager))
        default:
            throw ScenarioError("unknown MCP server in the scenario: \(s["server"] ?? "none")")
        }
    }
    var deferral: Deferral? = nil
    if let d = scenario["deferral"] as? [String: Any] {
        deferral = Deferral(
            setting: (d["setting"] as? String).flatMap(DeferralSetting.init(rawValue:)) ?? .deferred,
            strategy: (d["strategy"] as? String).flatMap(LoadStrategy.init(rawValue:)) ?? .native,
            deferrableTools: d["deferrable_tools"] as? [String] ?? [])
    }
    return (servers, deferral)
}

/// The scenario files marked `test_model` (run again on the test model).
func testModelScenarioFiles() -> [String] {
    scenarioFiles().filter { file in
        let data = try? Data(contentsOf: Paths.scenarios.appendingPathComponent(file))
        return ((data.flatMap { try? JSONSerialization.jsonObject(with: $0) }) as? [String: Any])?["test_model"] != nil
    }
}

func jsonText(_ value: Any) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), as: UTF8.self)
}

/// Structural equality of two JSONSerialization values.
func jsonEqual(_ a: Any, _ b: Any) -> Bool {
    switch (a, b) {
    case let (x as [String: Any], y as [String: Any]):
        return x.count == y.count && x.allSatisfy { key, value in y[key].map { jsonEqual(value, $0) } ?? false }
    case let (x as [Any], y as [Any]):
        return x.count == y.count && zip(x, y).allSatisfy { jsonEqual($0, $1) }
    case let (x as String, y as String):
        return x == y
    case let (x as NSNumber, y as NSNumber):
        return x == y
    case (is NSNull, is NSNull):
        return true
    default:
        return false
    }
}

/// A scenario's `tool_choice`: "auto", "required", "none" or {"name": tool}.
func scenarioToolChoice(_ value: Any?, _ file: String) throws -> ToolChoice? {
    switch value {
    case nil: return nil
    case let s as String where s == "auto": return .auto
    case let s as String where s == "required": return .required
    case let s as String where s == "none": return .noTool
    case let o as [String: Any]:
        return .tool(name: try #require(o["name"] as? String, "tool_choice without a name in \(file)"))
    default:
        Issue.record("unknown tool_choice \(String(describing: value)) in \(file)")
        return nil
    }
}

/// A scenario's `text_tool_calls` setting as the Swift enum.
func scenarioTextToolCalls(_ value: Any?, _ file: String) throws -> TextToolCalls? {
    switch value as? String {
    case nil: return nil
    case "off": return .off
    case "auto": return .auto
    case "constrained": return .constrained
    default:
        Issue.record("unknown text_tool_calls \(String(describing: value)) in \(file)")
        return nil
    }
}

func int(_ value: Any?) -> Int? {
    if let n = value as? Int { return n }
    if let n = value as? NSNumber { return n.intValue }
    return nil
}

@Suite struct ScenarioTests {
    @Test func scenariosAreFound() {
        #expect(!scenarioFiles().isEmpty, "no scenario files in \(Paths.scenarios.path)")
    }

    /// The negative control of the ledger timelines (the files with `ledger.clock_ms`): each passes as
    /// written (`scenario`), and fails, on each store, when any one of its `advance_clock` steps moves the
    /// clock a millisecond too little (the provider sees another tool result, or the drain differs).
    @Test func aLedgerTimelineFailsWhenTheClockMovesAMillisecondTooLittle() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-short-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var tried = 0
        for file in scenarioFiles() {
            let url = Paths.scenarios.appendingPathComponent(file)
            let scenario = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
            guard (scenario["ledger"] as? [String: Any])?["clock_ms"] != nil,
                let steps = scenario["steps"] as? [[String: Any]]
            else { continue }
            for (n, step) in steps.enumerated() {
                guard let ms = (step["advance_clock"] as? NSNumber)?.int64Value else { continue }
                var shortSteps = steps
                shortSteps[n]["advance_clock"] = ms - 1
                var short = scenario
                short["steps"] = shortSteps
                let shortURL = dir.appendingPathComponent("\(n)-\(file)")
                try JSONSerialization.data(withJSONObject: short).write(to: shortURL)
                for at in try LedgerAt.stores(short) {
                    try await withKnownIssue("\(file) on \(at.store): step \(n + 1) a millisecond short") {
                        try await runScenario("\(n)-\(file)", shortURL, short, streamed: false, at)
                    } matching: { issue in
                        let text = String(describing: issue)
                        return text.contains("expected") || text.contains("drain_decision")
                    }
                    tried += 1
                }
            }
        }
        #expect(tried >= 8, "\(tried) shortened steps")
    }

    @Test(arguments: scenarioFiles())
    func scenario(_ file: String) async throws {
        try await runScenario(file, streamed: false)
    }

    /// The same files through `agent.stream(_:)`: events in order, text deltas adding up to the output.
    @Test(arguments: scenarioFiles())
    func scenarioStreamed(_ file: String) async throws {
        try await runScenario(file, streamed: true)
    }

    /// A file with `test_model` runs again on the users' test model, without a provider: its replies are
    /// the exchanges' answers (scripted, `Model.testModel`, or by a function answering request n with the
    /// n-th, `Model.functionModel`), so the run must come out as it does against the loopback provider.
    @Test(arguments: testModelScenarioFiles())
    func scenarioOnTheTestModel(_ file: String) async throws {
        let url = Paths.scenarios.appendingPathComponent(file)
        let scenario = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let wires: [String: Wire] = ["openai_chat": .openAiChat, "anthropic": .anthropic, "openai_responses": .openAiResponses]
        let wire = try #require(wires[scenario["wire"] as? String ?? "openai_chat"])
        let name = (scenario["agent"] as? [String: Any])?["model"] as? String ?? ""
        let stream = scenario["stream"] as? Bool ?? false
        let replies: [Reply] = try (scenario["exchanges"] as? [[String: Any]] ?? []).map { e in
            let r = e["respond"] as? [String: Any] ?? [:]
            let usage = r["usage"] as? [String: Any] ?? [:]
            return Reply(
                content: r["content"] as? String,
                toolCalls: try (r["tool_calls"] as? [[String: Any]] ?? []).map { c in
                    ReplyCall(name: c["name"] as? String ?? "", argumentsJSON: try jsonText(c["arguments"] ?? [String: Any]()),
                              id: c["id"] as? String)
                },
                inputTokens: int(usage["input_tokens"]) ?? 0, outputTokens: int(usage["output_tokens"]) ?? 0)
        }
        let toolNames = (scenario["tools"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        let function: Model = .functionModel(wire: wire, name: name, stream: stream) { request in
                guard request.index >= 1, request.index <= replies.count else {
                    throw ToolError("request \(request.index) past the \(replies.count) exchanges")
                }
                guard request.toolNames == toolNames, request.body["model"] as? String == name else {
                    throw ToolError("unexpected request: tools \(request.toolNames), body \(request.bodyJSON)")
                }
                return replies[request.index - 1]
            }
        let expect = scenario["expect"] as? [String: Any] ?? [:]
        let input = scenario["input"] as? String ?? ""
        for streamed in [false, true] {
            let approvals = try ScriptedApprovals(scenario)
            // A script is used up by one run: each way gets a fresh agent on a fresh model.
            let fresh: Model = scenario["test_model"] as? String == "function" ? function
                : .testModel(replies, wire: wire, name: name, stream: stream)
            let agent = try await makeAgent(scenario, baseURL: "", approvals: approvals, file, model: fresh)
            let result = streamed ? try await viaStream(agent, .text(input), expect, file) : try await agent.run(input)
            try await checkResult(result, expect, approvals, agent, "\(file) (test model\(streamed ? ", streamed" : ""))")
        }
    }

    /// Runs through `stream`, checks the events, and returns the result `run` would.
    func viaStream(
        _ agent: Agent, _ input: RunInput, _ expect: [String: Any], _ file: String, _ context: ScenarioContext? = nil
    ) async throws -> RunResult {
        var kinds: [String] = []
        var stopReasons: [String] = []
        var fromText: [String] = []
        var text = ""
        var finished: RunResult?
        for try await event in agent.stream(input, context) {
            switch event {
            case let .runStarted(got):
                // A history in JSON (a file's `messages`) reports its last user message: checked by the
                // other cases; a message of parts reports their text view.
                if case .json = input {} else { #expect(got == input.summary, "\(file)") }
                kinds.append("run_started")
            case .modelRequest: kinds.append("model_request")
            case let .textDelta(piece):
                text += piece
                kinds.append("text_delta")
            case let .modelResponse(_, _, _, stopReason):
                kinds.append("model_response")
                stopReasons.append(stopReason.name)
            case let .toolCallRequested(_, name, _, readFromText):
                kinds.append("tool_call_requested")
                if readFromText { fromText.append(name) }
            case .toolStarted: kinds.append("tool_started")
            case .toolFinished: kinds.append("tool_finished")
            case .toolRefused: kinds.append("tool_refused")
            case let .approvalRequested(request):
                #expect(!request.callId.isEmpty, "\(file): approval_requested carries the request")
                kinds.append("approval_requested")
            case .checklistNudge: kinds.append("checklist_nudge")
            case .backgroundTaskStarted: kinds.append("background_task_started")
            case .backgroundTaskProgress: kinds.append("background_task_progress")
            case .backgroundTaskReported: kinds.append("background_task_reported")
            case .guardrailChecked: kinds.append("guardrail_checked")
            case let .runFinished(usage, result):
                #expect(usage == result.usage, "\(file)")
                finished = result
            case let .other(kind, _):
                // Every event the core sends has its own case: none arrives as the fallback.
                Issue.record("\(file): event \(kind) has no case of its own in AgentEvent")
                kinds.append(kind)
            }
        }
        #expect(kinds.first == "run_started", "\(file): \(kinds)")
        var at = 0
        for want in expect["events"] as? [String] ?? [] {
            let rest = kinds[at...]
            guard let i = rest.firstIndex(of: want) else {
                Issue.record("\(file): event \(want) missing (in order) from \(kinds)")
                break
            }
            at = i + 1
        }
        for absent in expect["absent_events"] as? [String] ?? [] {
            #expect(!kinds.contains(absent), "\(file): event \(absent) was sent, and must not be: \(kinds)")
        }
        if let want = expect["stop_reasons"] as? [String] {
            #expect(stopReasons == want, "\(file): stop reasons of the model_response events \(stopReasons)")
        }
        if let want = expect["from_text"] as? [String] {
            #expect(fromText == want, "\(file): the calls read from text \(fromText)")
        }
        if let want = expect["streamed_text"] as? String {
            #expect(text == want, "\(file): the text deltas \(text.debugDescription)")
        }
        let result = try #require(finished, "\(file): the stream ended without runFinished")
        #expect(text.hasSuffix(result.output), "\(file): text deltas \(text.debugDescription)")
        return result
    }

    /// The scenario's agent at `baseURL`, with the host approval handler `approvals`.
    func makeAgent(
        _ scenario: [String: Any], baseURL: String, approvals: ScriptedApprovals, _ file: String,
        ledger at: LedgerAt = .sqlite(), model override: Model? = nil
    ) async throws -> Agent
    {
        let wires: [String: Wire] = ["openai_chat": .openAiChat, "anthropic": .anthropic, "openai_responses": .openAiResponses]
        let wire = try #require(wires[scenario["wire"] as? String ?? "openai_chat"], "unsupported wire in \(file)")
        let agentSettings = scenario["agent"] as? [String: Any] ?? [:]
        // `agent.settings`: the model settings, snake_case as the core reads them.
        let modelSettings = agentSettings["settings"] as? [String: Any] ?? [:]

        let tools: [any AmbitTool] = try (scenario["tools"] as? [[String: Any]] ?? []).map { t in
            let behavior = t["behavior"] as? [String: Any] ?? [:]
            return ScenarioTool(
                name: t["name"] as? String ?? "",
                description: t["description"] as? String ?? "",
                parameters: try jsonText(t["parameters"] ?? [String: Any]()),
                returns: behavior["returns"] as? String,
                raises: behavior["raises"] as? String,
                returnsImage: behavior["returns_image"] as? [String: String],
                imageRepeat: int(behavior["repeat"]) ?? 1,
                level: try (t["level"] as? String).map { try Level($0) } ?? .unrestricted,
                requiresApproval: t["requires_approval"] as? Bool ?? false,
                allowBlank: t["allow_blank"] as? [String] ?? [],
                sleepsMs: int(behavior["sleeps_ms"]),
                untilCancelled: (behavior["until_cancelled"] as? Bool == true) ? behavior["progress"] as? String ?? "" : nil,
                tag: approvals.tag,
                waitsForRelease: (behavior["waits_for_release"] as? Bool == true) ? behavior["progress"] as? String ?? "" : nil,
                credentials: t["credentials"] as? [String] ?? []
            )
        }
        let policy = try scenarioPolicy(scenario, approvals)

        let (mcpServers, deferral) = try await scenarioTooling(scenario, at)
        at.run.rebuild = {
            try await self.makeAgent(scenario, baseURL: baseURL, approvals: approvals, file, ledger: at, model: override)
        }
        // `ledger`: the work ledger's four tools at `at`, bound to one run of a routine.
        var ledgerTools: LedgerTools? = nil
        if let l = scenario["ledger"] as? [String: Any] {
            let ledger = try await at.open()
            ledgerTools = try ledger.tools(
                scope: (l["scope"] as? String ?? "") + at.suffix,
                routineId: (l["routine_id"] as? String).map { $0 + at.suffix },
                runId: (l["run_id"] as? String ?? "") + at.suffix, limit: int(l["limit"]) ?? 5)
        }
        // `memory`: a fresh SQLite memory store (one per agent built: one per run of the file) and the name.
        var memory: Memory? = nil
        let agentName = (scenario["memory"] as? [String: Any])?["agent"] as? String
        if agentName != nil {
            memory = try await Memory.open(memoryURL())
        }
        // `agent.profiles`: each a model of the same wire and provider, under its own name and settings.
        var profiles: [String: Model] = [:]
        for (name, p) in agentSettings["profiles"] as? [String: [String: Any]] ?? [:] {
            let settings = p["settings"] as? [String: Any] ?? [:]
            profiles[name] = Model(
                wire: wire, name: p["model"] as? String ?? "", baseURL: baseURL,
                apiKey: agentSettings["api_key"] as? String, stream: scenario["stream"] as? Bool ?? false,
                maxRetries: 0, temperature: (settings["temperature"] as? NSNumber)?.doubleValue)
        }
        // `named_agents`: each an agent of its own (model, instructions, tools, policy) on the same provider.
        var named: [String: NamedAgent] = [:]
        for (name, n) in scenario["named_agents"] as? [String: [String: Any]] ?? [:] {
            var own: [String: Any] = [
                "name": "\(scenario["name"] as? String ?? "")/\(name)",
                "wire": scenario["wire"] as? String ?? "openai_chat",
                "stream": scenario["stream"] as? Bool ?? false,
                "agent": ["model": n["model"] ?? "", "api_key": agentSettings["api_key"] ?? ""],
                "tools": n["tools"] ?? [[String: Any]](),
                "policy": n["policy"] ?? [String: Any](),
            ]
            if let i = n["instructions"] as? String {
                own["agent"] = ["model": n["model"] ?? "", "api_key": agentSettings["api_key"] ?? "", "instructions": i]
            }
            let agent = try await makeAgent(own, baseURL: baseURL, approvals: approvals, "\(file)/\(name)")
            named[name] = NamedAgent(agent, description: n["description"] as? String ?? "")
        }
        return try Agent(
            model: override ?? Model(
                wire: wire,
                name: agentSettings["model"] as? String ?? "",
                baseURL: baseURL,
                apiKey: agentSettings["api_key"] as? String,
                stream: scenario["stream"] as? Bool ?? false,
                // No retries unless the scenario counts on them; `timeout_secs` is the per-request timeout.
                timeout: (agentSettings["timeout_secs"] as? NSNumber)?.doubleValue,
                maxRetries: int(agentSettings["max_retries"]) ?? 0,
                maxOutputTokens: int(modelSettings["max_output_tokens"]),
                temperature: (modelSettings["temperature"] as? NSNumber)?.doubleValue,
                topP: (modelSettings["top_p"] as? NSNumber)?.doubleValue,
                stop: modelSettings["stop"] as? [String],
                seed: int(modelSettings["seed"]),
                toolChoice: try scenarioToolChoice(modelSettings["tool_choice"], file),
                parallelToolCalls: modelSettings["parallel_tool_calls"] as? Bool,
                textToolCalls: try scenarioTextToolCalls(modelSettings["text_tool_calls"], file),
                reasoningEffort: modelSettings["reasoning_effort"] as? String,
                thinkingBudget: int(modelSettings["thinking_budget"]),
                promptCaching: modelSettings["prompt_caching"] as? Bool,
                strict: modelSettings["strict"] as? Bool, store: modelSettings["store"] as? Bool,
                headers: agentSettings["headers"] as? [String: String],
                query: agentSettings["query"] as? [String: String]
            ),
            instructions: agentSettings["instructions"] as? String,
            tools: tools,
            maxTurns: int(agentSettings["max_turns"]),
            policy: policy,
            builtins: scenario["builtins"] as? [String] ?? [],
            maxConcurrency: int(agentSettings["max_concurrency"]),
            maxTokens: int((agentSettings["budget"] as? [String: Any])?["max_tokens"]),
            maxCost: ((agentSettings["budget"] as? [String: Any])?["max_cost"] as? NSNumber)?.doubleValue,
            prices: (agentSettings["prices"] as? [String: [String: Any]] ?? [:]).mapValues { p in
                Price(
                    inputPerMtok: (p["input_per_mtok"] as? NSNumber)?.doubleValue ?? 0,
                    outputPerMtok: (p["output_per_mtok"] as? NSNumber)?.doubleValue ?? 0,
                    cacheReadPerMtok: (p["cache_read_per_mtok"] as? NSNumber)?.doubleValue ?? 0,
                    cacheWritePerMtok: (p["cache_write_per_mtok"] as? NSNumber)?.doubleValue ?? 0
                )
            },
            checklist: agentSettings["checklist"] as? Bool ?? false,
            checklistNudgeCap: int(agentSettings["checklist_nudge_cap"]),
            background: agentSettings["background"] as? Bool ?? false,
            scratchpad: agentSettings["scratchpad"] as? Bool ?? false,
            mcpServers: mcpServers,
            deferral: deferral,
            subagents: (agentSettings["subagents"] as? [String: Any]).map { sub in
                SubagentSettings(
                    maxDepth: UInt32(clamping: int(sub["max_depth"]) ?? 3),
                    memory: sub["memory"] as? String ?? "none"
                )
            },
            ledger: ledgerTools,
            memory: memory,
            agentName: agentName,
            // `agent.output`: the final answer's type, given as a JSON Schema.
            outputType: try (agentSettings["output"] as? [String: Any]).map { out in
                try OutputSchema(name: out["name"] as? String ?? "", schema: out["schema"] as? [String: Any] ?? [:],
                                 retries: int(out["retries"]))
            },
            skills: (scenario["skills"] as? [String: Any]).map { s in
                Skills(
                    dirs: s["dirs"] as? [String] ?? [],
                    agentManaged: s["agent_managed"] as? Bool ?? false,
                    indexEntries: int(s["index_entries"]))
            },
            knowledge: (scenario["knowledge"] as? [String: Any]).map { k in
                Knowledge(dir: k["dir"] as? String ?? "", inlineMaxBytes: int(k["inline_max_bytes"]))
            },
            credentials: scenarioCredentials(scenario),
            profiles: profiles,
            agents: named,
            hooks: try scenarioHooks(scenario),
            inputGuardrails: try scenarioGuardrails(scenario, "input_guardrails", reads: "input"),
            outputGuardrails: try scenarioGuardrails(scenario, "output_guardrails", reads: "output")
        )
    }

    /// `credentials` (the broker as data) with `credential_callbacks`, answered by an async closure.
    func scenarioCredentials(_ scenario: [String: Any]) -> Credentials? {
        guard let config = scenario["credentials"] as? [String: Any] else { return nil }
        let answers = scenario["credential_callbacks"] as? [String: String] ?? [:]
        var creds = Credentials()
        for (alias, source) in config["credentials"] as? [String: [String: Any]] ?? [:] {
            if let value = source["value"] as? String {
                creds = creds.value(alias, value)
            } else if let name = source["env"] as? String {
                creds = creds.env(alias, name)
            } else {
                let answer = answers[alias] ?? ""
                creds = creds.callback(alias) { _ in answer }
            }
        }
        for (name, alias) in config["shell_env"] as? [String: String] ?? [:] {
            creds = creds.shellEnv(name, alias: alias)
        }
        for rule in config["web_fetch"] as? [[String: String]] ?? [] {
            creds = creds.webFetch(host: rule["host"] ?? "", alias: rule["alias"] ?? "",
                                   header: rule["header"] ?? "authorization", prefix: rule["prefix"])
        }
        return creds
    }

    func runScenario(_ file: String, streamed: Bool) async throws {
        let url = Paths.scenarios.appendingPathComponent(file)
        let scenario = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        if scenario["session"] != nil {
            // Through Sessions, which does not stream: once on each store.
            if !streamed { try await runSessionScenario(file, url, scenario) }
            return
        }
        for at in try LedgerAt.stores(scenario) {
            try await runScenario(
                at.store == "sqlite" ? file : "\(file) (ledger on \(at.store))", url, scenario, streamed: streamed, at)
        }
    }

    func runScenario(_ file: String, _ url: URL, _ scenario: [String: Any], streamed: Bool, _ at: LedgerAt)
        async throws
    {
        let expect = scenario["expect"] as? [String: Any] ?? [:]
        let approvals = try ScriptedApprovals(scenario)
        let provider = try Provider(scenario: url, vars: at.vars(scenario))
        defer { provider.stop() }
        let first = try await makeAgent(scenario, baseURL: provider.baseURL, approvals: approvals, file, ledger: at)
        if let list = expect["tool_list"] as? [[String: Any]] {
            try checkToolList(first.listTools(), list, file)
        }
        let (agent, input) = try await runSteps(scenario, first, approvals, file, at)
        if let cancel = scenario["cancel"] as? [String: Any] {
            try await cancelWhenReached(cancel, provider, agent, input.text, streamed: streamed, file)
            try await provider.check(scenario, file)
            return
        }

        let outcome: Result<RunResult, any Error>
        do {
            outcome = .success(
                streamed ? try await viaStream(agent, input, expect, file, ScenarioContext(scenario))
                    : try await agent.run(input, ScenarioContext(scenario)))
        } catch {
            outcome = .failure(error)
        }

        if let expectedError = expect["error"] as? [String: Any] {
            switch outcome {
            case let .success(result):
                Issue.record("\(file): expected error \(expectedError), got output \(result.output.debugDescription)")
            case let .failure(error):
                let ambit = try #require(error as? AmbitError, "\(file): not an AmbitError: \(error)")
                if let code = expectedError["code"] as? String {
                    #expect(ambit.code == code, "\(file): \(ambit)")
                }
                if let part = expectedError["message_contains"] as? String {
                    #expect(ambit.message.contains(part), "\(file): \(ambit.message)")
                }
                if let hook = expectedError["hook"] as? String {
                    if case let .hookFailed(got, _, _) = ambit {
                        #expect(got == hook, "\(file): hook \(got)")
                    } else {
                        Issue.record("\(file): not hook_failed: \(ambit)")
                    }
                }
                if let guardrail = expectedError["guardrail"] as? String {
                    if case let .guardrailTripped(got, _, verdictJSON, _) = ambit {
                        #expect(got == guardrail, "\(file): guardrail \(got)")
                        if let verdict = expectedError["verdict"] {
                            let parsed = try JSONSerialization.jsonObject(
                                with: Data(verdictJSON.utf8), options: [.fragmentsAllowed])
                            #expect(jsonEqual(parsed, verdict), "\(file): verdict \(verdictJSON)")
                        }
                    } else {
                        Issue.record("\(file): not guardrail_tripped: \(ambit)")
                    }
                }
                if let attempt = expectedError["attempt"] as? String {
                    if case let .outputInvalid(got, _, _, _) = ambit {
                        #expect(got == attempt, "\(file): attempt \(got)")
                    } else {
                        Issue.record("\(file): the error carries no attempt: \(ambit)")
                    }
                }
                if let tools = expectedError["tools"] as? [String] {
                    if case let .outputTruncated(got, _, _) = ambit {
                        #expect(got == tools, "\(file): tools \(got)")
                    } else {
                        Issue.record("\(file): the error names no tools: \(ambit)")
                    }
                }
                if let usage = expectedError["usage"] as? [String: Any] {
                    let got: Usage
                    switch ambit {
                    case let .budgetExceeded(_, _, _, _, u, _), let .maxTurns(_, u, _), let .outputTruncated(_, u, _),
                        let .outputInvalid(_, _, u, _):
                        got = u
                    default:
                        Issue.record("\(file): the error carries no usage: \(ambit)")
                        return
                    }
                    try checkUsage(got, usage, file)
                }
            }
            try await checkOAuthStats(scenario, at, file)
            try await provider.check(scenario, file)
            return
        }

        let result: RunResult
        switch outcome {
        case let .success(r): result = r
        case let .failure(error):
            Issue.record("\(file): the run failed: \(error)")
            return
        }
        try await checkResult(result, expect, approvals, agent, file)
        try await checkDrain(scenario, at, file)
        try await checkOAuthStats(scenario, at, file)
        try await provider.check(scenario, file)
    }

    /// `expect.drain_decision` of the scenario (or of one of its `steps`): what `Ledger.drainDecision`
    /// answers for the routine's run (the default limits), on the ledger's clock: `stop` (null, or why)
    /// and `start_runs`.
    func checkDrain(_ scenario: [String: Any], _ at: LedgerAt, _ file: String, step: [String: Any]? = nil)
        async throws
    {
        let source = step ?? scenario
        guard let want = (source["expect"] as? [String: Any])?["drain_decision"] as? [String: Any] else { return }
        let l = scenario["ledger"] as? [String: Any] ?? [:]
        let ledger = try await at.open()
        let got = try await ledger.drainDecision(
            (l["routine_id"] as? String ?? "") + at.suffix, runId: (l["run_id"] as? String ?? "") + at.suffix)
        let stops: [DrainStop: String] = [
            .nothingWorkable: "nothing_workable", .queueEmpty: "queue_empty", .runDidNotReport: "run_did_not_report",
            .reportStale: "report_stale",
        ]
        if let stop = want["stop"] {
            #expect(got.stop.flatMap { stops[$0] } == stop as? String, "\(file): drain_decision.stop \(String(describing: got.stop))")
        }
        if let runs = int(want["start_runs"]) {
            #expect(Int(got.startRuns) == runs, "\(file): drain_decision.start_runs")
        }
    }

    /// `cancel`: the run (`agent.run`, or iterating `agent.stream`) goes in a Swift `Task`, cancelled
    /// once the provider has received request `at_request` (which it holds with its `delay_ms`): `run`
    /// must throw `AmbitError.cancelled`, the stream must end without `runFinished`.
    func cancelWhenReached(
        _ cancel: [String: Any], _ provider: Provider, _ agent: Agent, _ input: String, streamed: Bool,
        _ file: String
    ) async throws {
        let at = try #require(int(cancel["at_request"]), "\(file): cancel.at_request")
        let task = Task { () async -> String in
            do {
                if streamed {
                    for try await event in agent.stream(input) {
                        if case let .runFinished(_, result) = event { return "finished: \(result.output)" }
                    }
                    return "ended without runFinished"
                }
                return "finished: \(try await agent.run(input).output)"
            } catch let error as AmbitError {
                return "error \(error.code)"
            } catch {
                return "error \(error)"
            }
        }
        // Bounded polling on a real condition: the provider has the request.
        for _ in 0..<1000 {
            if int(try await provider.state()["served"]) ?? 0 >= at { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        task.cancel()
        let outcome = await task.value
        #expect(outcome == (streamed ? "ended without runFinished" : "error cancelled"), "\(file): \(outcome)")
    }

    /// `steps`: every step but the last runs to its result (its `expect.output` checked), each first
    /// putting the agent under its `with_policy`, or moves the ledger's manual clock (`advance_clock`); a
    /// step's `expect.drain_decision` is checked after it. Returns the agent and the input of the last
    /// step, which the caller runs as the mode says. Without `steps`: the agent and `input`.
    func runSteps(
        _ scenario: [String: Any], _ agent: Agent, _ approvals: ScriptedApprovals, _ file: String, _ at: LedgerAt
    ) async throws -> (Agent, RunInput) {
        guard let steps = scenario["steps"] as? [[String: Any]] else {
            return (agent, try RunInput(scenario, previous: nil))
        }
        let last = try #require(steps.last, "\(file): steps is empty")
        func narrowed(_ agent: Agent, _ step: [String: Any]) async throws -> Agent {
            // `new_agent`: a fresh agent built from the file (new MCP connections; the run's OAuth servers).
            var agent = agent
            if step["new_agent"] as? Bool == true, let rebuild = at.run.rebuild { agent = try await rebuild() }
            guard var fields = step["with_policy"] as? [String: Any] else { return agent }
            let on = fields.removeValue(forKey: "approvals") as? Bool ?? false
            return try agent.withPolicy(
                try Policy(json: try jsonText(fields), approvals: on ? approvals as any ApprovalHandler : nil))
        }
        var agent = agent
        var previous: RunResult?
        for (n, step) in steps.dropLast().enumerated() {
            if let ms = (step["advance_clock"] as? NSNumber)?.int64Value {
                let clock = try #require(at.clock, "\(file): step \(n + 1): advance_clock without ledger.clock_ms")
                _ = try clock.advance(ms: ms)
            } else {
                agent = try await narrowed(agent, step)
                let result = try await agent.run(try RunInput(step, previous: previous), ScenarioContext(scenario))
                if let output = (step["expect"] as? [String: Any])?["output"] as? String {
                    #expect(result.output == output, "\(file): step \(n + 1): output")
                }
                previous = result
            }
            try await checkDrain(scenario, at, "\(file): step \(n + 1)", step: step)
        }
        return (try await narrowed(agent, last), try RunInput(last, previous: previous))
    }

    /// `expect` against a finished run's result.
    func checkResult(
        _ result: RunResult, _ expect: [String: Any], _ approvals: ScriptedApprovals, _ agent: Agent, _ file: String
    ) async throws {
        if let output = expect["output"] as? String {
            #expect(result.output == output, "\(file): output")
        }
        if let want = expect["structured_output"] {
            let got = try result.structuredOutputJson.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) }
            #expect(
                got.map { NSDictionary(dictionary: $0 as? [String: Any] ?? [:]) }
                    == NSDictionary(dictionary: want as? [String: Any] ?? [:]),
                "\(file): structured_output \(String(describing: result.structuredOutputJson))")
            // And decoded as a Codable of the caller's, as an app would (the output scenarios' weather).
            struct Weather: Decodable, Equatable { let city: String; let temperature_c: Int; let sky: String }
            if let city = (want as? [String: Any])?["city"] as? String {
                #expect(try result.decode(Weather.self).city == city, "\(file): decode")
            }
        }
        if let calls = expect["tool_calls"] as? [[String: Any]] {
            #expect(result.toolCalls.count == calls.count, "\(file): \(result.toolCalls)")
            for (actual, wanted) in zip(result.toolCalls, calls) {
                if let name = wanted["name"] as? String { #expect(actual.name == name) }
                if let arguments = wanted["arguments"] {
                    let got = try JSONSerialization.jsonObject(
                        with: Data(actual.argumentsJson.utf8), options: [.fragmentsAllowed])
                    #expect(jsonEqual(got, arguments), "\(file): arguments \(actual.argumentsJson)")
                }
                if let text = wanted["result"] as? String { #expect(actual.result == text) }
                if let isError = wanted["is_error"] as? Bool { #expect(actual.isError == isError) }
            }
        }
        if let requests = expect["approval_requests"] as? [[String: Any]] {
            try await checkApprovalRequests(approvals.requests, requests, file)
        }
        if let list = expect["tool_list_after"] as? [[String: Any]] {
            try checkToolList(agent.listTools(), list, "\(file) (after the run)")
        }
        if let open = expect["open_items"] as? [String] {
            #expect(result.openItems.map(\.text) == open, "\(file): open items \(result.openItems)")
        }
        if let stop = expect["stop_reason"] as? String {
            #expect(result.stopReason.name == stop, "\(file): stop reason \(result.stopReason)")
        }
        if let cost = (expect["cost"] as? NSNumber)?.doubleValue {
            #expect(result.cost.map { abs($0 - cost) <= 1e-12 } == true, "\(file): cost \(String(describing: result.cost))")
        }
        if expect["host_saw_cancel"] as? Bool == true {
            let saw = await SawCancel.shared.take(approvals.tag)
            #expect(saw > 0, "the host tool never saw its cancellation token")
        }
        if let usage = expect["usage"] as? [String: Any] {
            try checkUsage(result.usage, usage, file)
        }
    }

    /// A `session` scenario on a fresh SQLite file and on PostgreSQL (the server scripts/test.sh starts;
    /// each run makes its own session in its database).
    func runSessionScenario(_ file: String, _ url: URL, _ scenario: [String: Any]) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-sessions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var stores = [("sqlite", "sqlite://" + dir.appendingPathComponent("sessions.db").path)]
        if let postgres = Paths.postgresURL() {
            stores.append(("postgres", postgres))
        } else {
            print("\(file): not run on PostgreSQL: no AMBIT_TEST_POSTGRES_URL nor .artifacts/postgres.url")
        }
        for (store, storeURL) in stores {
            try await runSession(scenario, url, storeURL, "\(file) (\(store))")
        }
    }

    /// The scenario's `session.steps` (runs and resumes) in one session through `Sessions`; the last result
    /// checked against `expect`.
    func runSession(_ scenario: [String: Any], _ url: URL, _ storeURL: String, _ place: String) async throws {
        let session = scenario["session"] as? [String: Any] ?? [:]
        let config = session["config"] as? [String: Any] ?? [:]
        let expect = scenario["expect"] as? [String: Any] ?? [:]
        let approvals = try ScriptedApprovals(scenario)
        let provider = try Provider(scenario: url)
        defer { provider.stop() }
        func open() async throws -> Sessions {
            try await Sessions.open(
                storeURL, contextWindow: int(config["context_window"]),
                compactAt: (config["compact_at"] as? NSNumber)?.doubleValue ?? 0.85,
                keepRecent: int(config["keep_recent"]) ?? 2)
        }
        var sessions = try await open()
        var agent = try await makeAgent(scenario, baseURL: provider.baseURL, approvals: approvals, place)
        let sid = try await sessions.create()
        var last: RunResult? = nil
        let deliveries = try sessions.deliveries()
        var delivered = deliveries.makeAsyncIterator()
        for (index, step) in (session["steps"] as? [[String: Any]] ?? []).enumerated() {
            let at = "\(place): step \(index + 1)"
            let want = step["expect"] as? [String: Any] ?? [:]
            if step["release"] as? Bool == true {
                // The held tools finish; their results land in the session after the run that started them.
                await Releases.shared.open(approvals.tag)
                try await checkTaskStep(sessions, &delivered, sid, want, at)
                continue
            }
            last = nil
            do {
                let result: RunResult
                if let answer = step["resume"] as? [String: Any] {
                    // As another process would: a new store handle, a new agent.
                    sessions = try await open()
                    agent = try await makeAgent(scenario, baseURL: provider.baseURL, approvals: approvals, place)
                    result = try await sessions.resume(agent, sessionId: sid, decision: try decision(answer))
                } else if let parts = step["input"] as? [[String: String]] {
                    // A user message of parts, through the typed `Part`s.
                    result = try await sessions.run(agent, sessionId: sid, parts: try parts.map(scenarioPart))
                } else {
                    result = try await sessions.run(agent, sessionId: sid, input: step["input"] as? String ?? "")
                }
                #expect(want["parked"] == nil && want["error"] == nil,
                        "\(at): expected \(want), got output \(result.output.debugDescription)")
                if let output = want["output"] as? String { #expect(result.output == output, "\(at): output") }
                try await checkTaskStep(sessions, &delivered, sid, want, at)
                last = result
            } catch let SessionError.awaitingApproval(parkedId, request, _) {
                let parked = try #require(want["parked"] as? [String: Any], "\(at): parked on \(request)")
                #expect(parkedId == sid, "\(at): the parked session")
                let pendingText = try await sessions.pending(sid)
                let text = try #require(pendingText, "\(at): parked, but nothing is pending")
                let pending = try #require(
                    try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(at): \(text)")
                #expect(pending["tool"] as? String == request["tool"], "\(at): the pending tool")
                try checkEntries([pending], [parked], "\(at): parked")
            } catch let error as SessionError {
                let wanted = try #require(want["error"] as? [String: Any], "\(at) failed: \(error)")
                #expect(error.code == wanted["code"] as? String, "\(at): \(error)")
                if let part = wanted["message_contains"] as? String {
                    #expect(error.description.contains(part), "\(at): \(error)")
                }
            }
        }
        let result = try #require(last, "\(place): the last step did not finish a run")
        try await checkResult(result, expect, approvals, agent, place)
        if let log = expect["session_log"] as? [String] {
            let text = try await sessions.entriesJSON(sid)
            let entries = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] ?? []
            #expect(entries.map { $0["kind"] as? String ?? "" } == log, "\(place): session_log")
        }
    }

    /// A part of a session step's input as the typed `Part` (`data` base64).
    func scenarioPart(_ p: [String: String]) throws -> Part {
        let bytes = { (key: String) throws -> Data in
            try #require(Data(base64Encoded: p[key] ?? ""), "a part's \(key) is not base64")
        }
        switch p["type"] {
        case "text": return .text(p["text"] ?? "")
        case "image": return .image(try bytes("data"), mediaType: p["media_type"])
        case "image_url": return .imageURL(p["url"] ?? "")
        default: return .file(try bytes("data"), mediaType: p["media_type"] ?? "", filename: p["filename"] ?? "")
        }
    }

    /// A session step's `delivery` (the next one announced) and `task` (`taskResult` of its `task_id`),
    /// each matched key by key (snake_case, as the file has them).
    func checkTaskStep(
        _ sessions: Sessions, _ delivered: inout AsyncStream<Delivery>.Iterator, _ sid: String,
        _ want: [String: Any], _ at: String
    ) async throws {
        if let wanted = want["delivery"] as? [String: Any] {
            let got = try #require(await delivered.next(), "\(at): the deliveries ended")
            #expect(got.sessionId == sid, "\(at): delivery.session_id")
            let row: [String: Any] = [
                "session_id": got.sessionId, "task_id": got.taskId, "name": got.name, "status": got.status,
                "result": got.result,
            ]
            try checkEntries([row], [wanted], "\(at): delivery")
        }
        if let wanted = want["task"] as? [String: Any] {
            let got = try await sessions.taskResult(sid, taskId: wanted["task_id"] as? String ?? "")
            let row: [String: Any] = [
                "session_id": got.sessionId, "task_id": got.taskId, "name": got.name, "status": got.status,
                "note": got.note ?? NSNull(), "result": got.result ?? NSNull(),
            ]
            try checkEntries([row], [wanted], "\(at): task")
        }
    }

    func checkUsage(_ got: Usage, _ usage: [String: Any], _ file: String) throws {
        let actual: [String: UInt64] = [
            "requests": got.requests,
            "input_tokens": got.inputTokens,
            "output_tokens": got.outputTokens,
            "cache_read_tokens": got.cacheReadTokens,
            "cache_write_tokens": got.cacheWriteTokens,
        ]
        for (key, value) in usage {
            let field = try #require(actual[key], "\(file): unknown usage field \(key)")
            #expect(int(value).map(UInt64.init) == field, "\(file): usage.\(key)")
        }
    }
}
