// Runs every scenario of tests/scenarios (the files the Rust, Python and Node suites run) against the
// loopback provider, one test case per file. scripts/test-swift.sh copies the scenarios and the provider
// into .artifacts/; AMBIT_SCENARIOS_DIR and AMBIT_PROVIDER override the locations.

import Foundation
import Testing

@testable import Ambit

enum Paths {
    static let packageDir = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var scenarios: URL {
        if let dir = ProcessInfo.processInfo.environment["AMBIT_SCENARIOS_DIR"] { return URL(fileURLWithPath: dir) }
        return packageDir.appendingPathComponent(".artifacts/scenarios")
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

    init(scenario: URL) throws {
        process.executableURL = Paths.provider
        process.arguments = ["--exit-on-eof", scenario.path]
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

    func stop() {
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// A scenario tool: `returns` (with `{arg}` substitution) or `raises`.
struct ScenarioTool: AmbitTool {
    let name: String
    let description: String
    let parameters: String
    let returns: String?
    let raises: String?

    func call(arguments: [String: Any]) async throws -> String {
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

func int(_ value: Any?) -> Int? {
    if let n = value as? Int { return n }
    if let n = value as? NSNumber { return n.intValue }
    return nil
}

@Suite struct ScenarioTests {
    @Test func scenariosAreFound() {
        #expect(!scenarioFiles().isEmpty, "no scenario files in \(Paths.scenarios.path)")
    }

    @Test(arguments: scenarioFiles())
    func scenario(_ file: String) async throws {
        let url = Paths.scenarios.appendingPathComponent(file)
        let scenario = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        #expect(scenario["wire"] as? String == "openai_chat", "unsupported wire in \(file)")
        let agentSettings = scenario["agent"] as? [String: Any] ?? [:]
        let expect = scenario["expect"] as? [String: Any] ?? [:]

        let tools: [any AmbitTool] = try (scenario["tools"] as? [[String: Any]] ?? []).map { t in
            let behavior = t["behavior"] as? [String: Any] ?? [:]
            return ScenarioTool(
                name: t["name"] as? String ?? "",
                description: t["description"] as? String ?? "",
                parameters: try jsonText(t["parameters"] ?? [String: Any]()),
                returns: behavior["returns"] as? String,
                raises: behavior["raises"] as? String
            )
        }

        let provider = try Provider(scenario: url)
        defer { provider.stop() }

        let agent = try Agent(
            model: .openAIChat(
                agentSettings["model"] as? String ?? "",
                baseURL: provider.baseURL,
                apiKey: agentSettings["api_key"] as? String
            ),
            instructions: agentSettings["instructions"] as? String,
            tools: tools,
            maxTurns: int(agentSettings["max_turns"])
        )

        let outcome: Result<RunResult, any Error>
        do {
            outcome = .success(try await agent.run(scenario["input"] as? String ?? ""))
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
            }
            return
        }

        let result: RunResult
        switch outcome {
        case let .success(r): result = r
        case let .failure(error):
            Issue.record("\(file): the run failed: \(error)")
            return
        }
        if let output = expect["output"] as? String {
            #expect(result.output == output)
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
        if let usage = expect["usage"] as? [String: Any] {
            let actual: [String: UInt64] = [
                "requests": result.usage.requests,
                "input_tokens": result.usage.inputTokens,
                "output_tokens": result.usage.outputTokens,
                "cache_read_tokens": result.usage.cacheReadTokens,
                "cache_write_tokens": result.usage.cacheWriteTokens,
            ]
            for (key, value) in usage {
                let got = try #require(actual[key], "\(file): unknown usage field \(key)")
                #expect(int(value).map(UInt64.init) == got, "\(file): usage.\(key)")
            }
        }
    }
}
