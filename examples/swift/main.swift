// The ambit demo in Swift: a weather agent with one host tool.
//   swift run AmbitWeather [--base-url URL] [question]
// A real model when OPENAI_API_KEY or OPENAI_BASE_URL is set (AMBIT_MODEL picks it), or at --base-url
// (scripts/test-swift.sh points it at the loopback provider, whose answers are scripted).

import Ambit
import Foundation

struct GetWeather: AmbitTool {
    let name = "get_weather"
    let description = "Current weather for a city."
    let parameters = #"{"type":"object","properties":{"city":{"type":"string","description":"The city's name"}},"required":["city"]}"#

    func call(arguments: [String: Any]) async throws -> String {
        guard let city = arguments["city"] as? String else { throw ToolError("city must be a string") }
        let known = ["paris": ("sunny", 22), "london": ("rainy", 14), "tokyo": ("cloudy", 18)]
        let (sky, temp) = known[city.lowercased()] ?? ("clear", 20)
        return #"{"city":"\#(city)","sky":"\#(sky)","temperature_c":\#(temp)}"#
    }
}

var args = Array(CommandLine.arguments.dropFirst())
var baseURL: String? = nil
if let i = args.firstIndex(of: "--base-url"), i + 1 < args.count {
    let url = args[i + 1]
    baseURL = url
    args.removeSubrange(i...(i + 1))
    print("Using the model at \(url) (the loopback provider's answers are SCRIPTED).")
}
let env = ProcessInfo.processInfo.environment
let name = env["AMBIT_MODEL"] ?? "gpt-4.1-mini"
let question = args.isEmpty ? "What's the weather in Paris?" : args.joined(separator: " ")

do {
    let agent = try Agent(model: .openAIChat(name, baseURL: baseURL, apiKey: baseURL == nil ? nil : "sk-scripted"),
                          instructions: "You answer weather questions briefly.", tools: [GetWeather()])
    print("> \(question)")
    let result = try await agent.run(question)
    for call in result.toolCalls {
        print("  tool \(call.name)(\(call.argumentsJson)) -> \(call.result)")
    }
    print(result.output)
    print("[\(result.usage.requests) model requests, \(result.usage.inputTokens) input + \(result.usage.outputTokens) output tokens]")
} catch let error as AmbitError {
    print("error [\(error.code)]: \(error.message)")
    exit(1)
}
