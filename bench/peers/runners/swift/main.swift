// ambit from Swift: the weather job of bench/peers (see bench/peers/README.md for the protocol).
import Ambit
import Foundation

let env = ProcessInfo.processInfo.environment
let baseURL = env["BENCH_BASE_URL"] ?? ""
let wire = env["BENCH_WIRE"] ?? "chat"
let stream = env["BENCH_STREAM"] == "1"
let runs = Int(env["BENCH_RUNS"] ?? "") ?? 200
let warmup = Int(env["BENCH_WARMUP"] ?? "") ?? 20

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}
let calls = Counter()

struct GetWeather: AmbitTool {
    let name = "get_weather"
    let description = "Current weather for a city."
    let parameters = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
    func call(arguments: [String: Any]) async throws -> String {
        calls.add()
        return "sunny in \(arguments["city"] as? String ?? "")"
    }
}

struct Extra: AmbitTool {
    let name: String
    let description: String
    let parameters: String
    func call(arguments: [String: Any]) async throws -> String { "ok" }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

func usage() -> (cpuMs: Double, maxrssKb: Int) {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    let ms = { (t: timeval) in Double(t.tv_sec) * 1000 + Double(t.tv_usec) / 1000 }
    return (ms(u.ru_utime) + ms(u.ru_stime), Int(u.ru_maxrss))
}

var tools: [any AmbitTool] = [GetWeather()]
var extraNames: [String] = []
if let path = env["BENCH_TOOLS"], !path.isEmpty {
    guard let data = FileManager.default.contents(atPath: path),
          let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { fail("cannot read \(path)") }
    for t in list {
        let params = try JSONSerialization.data(withJSONObject: t["parameters"] ?? [:])
        let name = t["name"] as? String ?? ""
        extraNames.append(name)
        tools.append(Extra(name: name, description: t["description"] as? String ?? "",
                           parameters: String(decoding: params, as: UTF8.self)))
    }
}
let model: Model
switch wire {
case "responses": model = .openAIResponses("gpt-4.1", baseURL: baseURL, apiKey: "bench-key", stream: stream)
case "anthropic": model = .anthropic("claude-sonnet-4-5", baseURL: baseURL, apiKey: "bench-key", stream: stream)
default: model = .openAIChat("gpt-4.1", baseURL: baseURL, apiKey: "bench-key", stream: stream)
}
let deferral = env["BENCH_DEFER"] == "1" ? Deferral(deferrableTools: extraNames) : nil
let agent = try Agent(model: model, tools: tools, deferral: deferral)
print("READY")
fflush(stdout)

var output = ""
for _ in 0..<warmup { output = try await agent.run("weather in Paris?").output }
let start = usage()
let t0 = DispatchTime.now().uptimeNanoseconds
for _ in 0..<runs { output = try await agent.run("weather in Paris?").output }
let t1 = DispatchTime.now().uptimeNanoseconds
let end = usage()
if !output.contains("sunny") || calls.value != warmup + runs {
    fail("ambit_swift: wrong result: output=\(output), tool calls=\(calls.value)")
}
let line: [String: Any] = [
    "runs": runs, "cpu_ms": end.cpuMs - start.cpuMs, "wall_ms": Double(t1 - t0) / 1e6,
    "maxrss_kb": end.maxrssKb, "tool_calls": calls.value, "output": output,
]
print(String(decoding: try JSONSerialization.data(withJSONObject: line), as: UTF8.self))
