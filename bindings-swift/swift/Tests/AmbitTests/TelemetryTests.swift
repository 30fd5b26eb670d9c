// Telemetry from Swift: the scenario files with a `telemetry` section run with OTLP export on
// (`Telemetry.enable`), to the real OTLP/HTTP receiver scripts/test-swift.sh starts on the host
// (tests/otel/receiver.py, the official `opentelemetry-proto` decoding the exporter's protobuf); the
// receiver runs the checker every suite shares (tests/otel/check.py) on `POST /check`.

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

@testable import Ambit

func otelURL() throws -> String {
    if let url = ProcessInfo.processInfo.environment["AMBIT_OTEL_URL"], !url.isEmpty { return url }
    let file = Paths.packageDir.appendingPathComponent(".artifacts/otel.url")
    return try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The scenario files with a `telemetry` section.
func telemetryScenarioFiles() -> [String] {
    scenarioFiles().filter { file in
        let data = try? Data(contentsOf: Paths.scenarios.appendingPathComponent(file))
        return ((data.flatMap { try? JSONSerialization.jsonObject(with: $0) }) as? [String: Any])?["telemetry"] != nil
    }
}

/// `POST url` with a JSON body: the status and the body's text.
func post(_ url: String, _ body: Any) async throws -> (Int, String) {
    var request = URLRequest(url: try #require(URL(string: url)))
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "content-type")
    request.httpBody = try JSONSerialization.data(withJSONObject: body)
    return try await withCheckedThrowingContinuation { continuation in
        URLSession.shared.dataTask(with: request) { data, response, error in
            if let data, let status = (response as? HTTPURLResponse)?.statusCode {
                continuation.resume(returning: (status, String(decoding: data, as: UTF8.self)))
            } else {
                continuation.resume(throwing: error ?? ScenarioError("no answer from \(url)"))
            }
        }.resume()
    }
}

@Suite(.serialized) struct TelemetryTests {
    @Test func theFilesAreFound() {
        #expect(!telemetryScenarioFiles().isEmpty)
    }

    @Test(arguments: telemetryScenarioFiles())
    func theExportedSpanTree(_ file: String) async throws {
        let receiver = try otelURL()
        let scenario = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: Paths.scenarios.appendingPathComponent(file)))
                as? [String: Any])
        defer { try? Telemetry.disable() }
        for content in [false, true] {
            try Telemetry.enable(
                endpoint: receiver, headers: ["x-ambit-suite": "swift"], recordContent: content, serviceName: "ambit-swift")
            try await ScenarioTests().runScenario(file, streamed: false)
            try Telemetry.flush()
            let (status, text) = try await post("\(receiver)/check", ["scenario": scenario, "content": content])
            #expect(status == 200, "\(file), content \(content): \(text)")
        }
        // Negative control: the run with contents recorded them, so the check with contents off fails on it.
        let (status, text) = try await post("\(receiver)/check", ["scenario": scenario, "content": false])
        #expect(status == 422 && text.contains("record_content is off and span"), "\(status) \(text)")
        // Off: a run makes no span (the latest trace is still the one with contents).
        try Telemetry.disable()
        try await ScenarioTests().runScenario(file, streamed: false)
        let (after, afterText) = try await post("\(receiver)/check", ["scenario": scenario, "content": true])
        #expect(after == 200, "\(afterText)")
    }

    @Test func aBadEndpointIsAConfigErrorNamingIt() {
        #expect(throws: AmbitError.self) { try Telemetry.enable(endpoint: "localhost 4318") }
        do {
            try Telemetry.enable(endpoint: "ftp://localhost:4318")
            Issue.record("an ftp endpoint was accepted")
        } catch let AmbitError.config(message) {
            #expect(message.contains("not an http"), "\(message)")
        } catch {
            Issue.record("\(error)")
        }
    }
}
