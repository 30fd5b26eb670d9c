// Bad input is a Swift error (AmbitError.config), never a crash. No provider is needed: the agent is
// checked when it is built.

import Foundation
import Testing

@testable import Ambit

struct NamedTool: AmbitTool {
    var name = "get_weather"
    var description = "Current weather for a city."
    var parameters = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
    func call(arguments: [String: Any]) async throws -> String { "sunny" }
}

let model = Model.openAIChat("gpt-4.1", baseURL: "http://127.0.0.1:9/v1", apiKey: "sk-test")

func configError(_ build: () throws -> Agent) -> AmbitError? {
    do {
        _ = try build()
        return nil
    } catch {
        return error as? AmbitError
    }
}

@Suite struct ConfigTests {
    @Test func badProfilesAndNamedAgentsAreAConfigErrorNamingTheField() throws {
        let badName = try #require(configError {
            try Agent(model: model, profiles: ["no spaces": .openAIChat("gpt-4.1-nano")])
        })
        guard case let .config(message) = badName else { Issue.record("\(badName)"); return }
        #expect(message.contains("profiles: 'no spaces'"), "\(message)")
        let callee = try Agent(model: model)
        let blank = try #require(configError {
            try Agent(model: model, agents: ["helper": NamedAgent(callee, description: " ")])
        })
        guard case let .config(message2) = blank else { Issue.record("\(blank)"); return }
        #expect(message2.contains("named_agents.helper.description"), "\(message2)")
        // The named-agent tools exist only with named agents; the profile parameter lists the names.
        #expect(try !Agent(model: model).toolNames.contains("agent_delegate"))
        let caller = try Agent(model: model, subagents: SubagentSettings(), profiles: ["fast": .openAIChat("n")],
                               agents: ["helper": NamedAgent(callee, description: "Helps.")])
        #expect(try caller.toolNames.contains("agent_delegate") && caller.toolNames.contains("agent_list_named"))
    }

    @Test func buildsAgent() throws {
        let agent = try Agent(model: model, instructions: "Be brief.", tools: [NamedTool()], maxTurns: 3)
        #expect(try agent.toolNames == ["get_weather"])
    }

    @Test func outputTypesAWireWouldRefuseAreAConfigErrorNamingThem() throws {
        let object = #"{"type":"object"}"#
        for (output, named) in [
            (OutputSchema(name: "my answer", schemaJSON: object), "'my answer'"),
            (OutputSchema(name: "W", schemaJSON: #"{"type":"array"}"#), #""type": "object""#),
            (OutputSchema(name: "W", schemaJSON: "not json"), "is not JSON"),
        ] {
            let error = try #require(configError { try Agent(model: model, outputType: output) })
            #expect(error.code == "config" && error.message.contains(named), "\(error)")
        }
        let ok = try Agent(model: model, outputType: OutputSchema(name: "W", schemaJSON: object, retries: 1))
        #expect(try ok.toolNames == [])
    }

    @Test func duplicateToolNamesAreAConfigError() throws {
        let error = try #require(configError { try Agent(model: model, tools: [NamedTool(), NamedTool()]) })
        #expect(error.code == "config")
        #expect(error.message.contains("get_weather"))
        guard case .config = error else { Issue.record("not .config: \(error)"); return }
    }

    @Test(arguments: [
        #"{"type":"string"}"#,
        #"[1,2]"#,
        #""object""#,
        #"not json"#,
    ])
    func parametersNotAnObjectSchemaAreAConfigError(_ parameters: String) throws {
        let tool = NamedTool(parameters: parameters)
        let error = try #require(configError { try Agent(model: model, tools: [tool]) })
        #expect(error.code == "config", "\(error)")
    }

    /// SPEC §3: a per-endpoint maxToolNameBytes is never larger than the wire's own limit (nor negative).
    @Test func maxToolNameBytesAboveTheWireIsAConfigErrorNamingIt() throws {
        let above = try #require(configError {
            try Agent(model: .openAIChat("m", baseURL: "http://127.0.0.1:9/v1", maxToolNameBytes: 65))
        })
        #expect(above.code == "config")
        #expect(above.message.contains("max_tool_name_bytes 65 is larger than the openai_chat wire's own limit of 64"),
                "\(above)")
        let negative = try #require(configError { try Agent(model: .anthropic("m", maxToolNameBytes: -1)) })
        #expect(negative.message.contains("max_tool_name_bytes must be a whole number, 0 or more; got -1"), "\(negative)")
        // A negative count is refused by name, never taken as the default (it used to become nil).
        let retries = try #require(configError {
            try Agent(model: Model(wire: .openAiChat, name: "m", maxRetries: -1))
        })
        #expect(retries.message.contains("max_retries must be a whole number, 0 or more; got -1"), "\(retries)")
        let tokens = try #require(configError { try Agent(model: .anthropic("m", maxTokens: -5)) })
        #expect(tokens.message.contains("max_tokens must be a whole number, 0 or more; got -5"), "\(tokens)")
        // At the wire's limit, or below it, the agent is built.
        _ = try Agent(model: .anthropic("m", maxToolNameBytes: 128))
        _ = try Agent(model: .openAIResponses("m", maxToolNameBytes: 20))
    }

    /// Issue 14: a model setting out of range, or one the wire lacks, is a config error naming it.
    @Test func badModelSettingsAreAConfigErrorNamingThem() throws {
        let url = "http://127.0.0.1:9/v1"
        for (m, words) in [
            (Model(wire: .openAiChat, name: "m", baseURL: url, temperature: 2.5), "temperature must be between 0 and 2, got 2.5"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, temperature: .nan), "temperature must be between 0 and 2, got NaN"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, topP: 1.5), "top_p must be between 0 and 1, got 1.5"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, maxOutputTokens: 0), "max_output_tokens must be at least 1"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, maxOutputTokens: -1), "max_output_tokens must be a whole number, 0 or more; got -1"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, stop: ["a", "b", "c", "d", "e"]), "stop takes 1 to 4 texts, got 5"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, toolChoice: .tool(name: " ")), "tool_choice names a tool"),
            (Model(wire: .anthropic, name: "m", baseURL: url, seed: 7), "seed is not a setting of the anthropic wire"),
            (Model(wire: .anthropic, name: "m", baseURL: url, temperature: 0.5), "temperature is not a setting of the anthropic wire"),
            (Model(wire: .openAiResponses, name: "m", baseURL: url, stop: ["END"]), "stop is not a setting of the openai_responses wire"),
            (Model(wire: .anthropic, name: "m", baseURL: url, maxTokens: 10, maxOutputTokens: 20),
             "max_tokens (10) and max_output_tokens (20) are the same setting"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, maxTokens: 10), "max_tokens is an Anthropic setting; on the openai_chat wire use max_output_tokens"),
        ] {
            let error = try #require(configError { try Agent(model: m) }, "\(words)")
            #expect(error.code == "config")
            #expect(error.message.contains(words), "\(error)")
        }
        // Negative control: the same settings in range, on wires that have them, build.
        _ = try Agent(model: Model(wire: .openAiChat, name: "m", baseURL: url, maxOutputTokens: 1, temperature: 2, topP: 0,
                                   stop: ["a"], seed: 7, toolChoice: .tool(name: "f"), parallelToolCalls: false))
        _ = try Agent(model: Model(wire: .anthropic, name: "m", baseURL: url, maxTokens: 10, maxOutputTokens: 10,
                                   stop: ["x"], toolChoice: .noTool))
    }

    /// Issue 14, items 1 and 5: reasoning, thinking, text tool calls, headers and query parameters, refused
    /// naming them where wrong.
    @Test func reasoningThinkingTextCallsHeadersAndQueryAreRefusedByName() throws {
        let url = "http://127.0.0.1:9/v1"
        for (m, words) in [
            (Model(wire: .openAiChat, name: "m", baseURL: url, reasoningEffort: "extreme"), "reasoning_effort must be one of none, minimal"),
            (Model(wire: .anthropic, name: "m", baseURL: url, reasoningEffort: "minimal"),
             "reasoning_effort \"minimal\" is not a value of the anthropic wire"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, thinkingBudget: 2048),
             "thinking_budget is not a setting of the openai_chat wire; use reasoning_effort"),
            (Model(wire: .anthropic, name: "m", baseURL: url, thinkingBudget: 8000), "thinking_budget (8000) must be less than max_tokens (4096)"),
            (Model(wire: .anthropic, name: "m", baseURL: url, textToolCalls: .auto), "text_tool_calls is not a setting of the anthropic wire"),
            (Model(wire: .openAiResponses, name: "m", baseURL: url, promptCaching: false), "prompt_caching is not a setting of the openai_responses wire"),
            (Model(wire: .anthropic, name: "m", baseURL: url, toolChoice: .required, thinkingBudget: 2048),
             #"tool_choice "required" cannot be used with thinking_budget"#),
            (Model(wire: .openAiChat, name: "m", baseURL: url, store: false), "store is not a setting of the openai_chat wire"),
            (Model(wire: .anthropic, name: "m", baseURL: url, strict: true), "strict is not a setting of the anthropic wire"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, headers: ["Host": "evil.example"]), "headers: Host is set by the HTTP exchange itself"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, headers: ["api-key": "k\r\nX: 1"]), "the value of api-key is not a valid header value"),
            (Model(wire: .openAiChat, name: "m", baseURL: url, query: ["": "x"]), "query: a parameter name is empty"),
        ] {
            let error = try #require(configError { try Agent(model: m) }, "\(words)")
            #expect(error.code == "config")
            #expect(error.message.contains(words), "\(error)")
        }
        // Negative control: good ones build.
        _ = try Agent(model: Model(wire: .openAiChat, name: "m", baseURL: url, textToolCalls: .constrained, reasoningEffort: "low",
                                   headers: ["api-key": "k"], query: ["api-version": "2024-10-21"]))
        _ = try Agent(model: Model(wire: .anthropic, name: "m", baseURL: url, maxOutputTokens: 4096, reasoningEffort: "max",
                                   thinkingBudget: 2048, promptCaching: false))
    }

    @Test func emptyToolNameIsAConfigError() throws {
        let error = try #require(configError { try Agent(model: model, tools: [NamedTool(name: " ")]) })
        #expect(error.code == "config")
    }

    @Test(arguments: [0, -1, Int(UInt32.max) + 1])
    func maxTurnsOutOfRangeIsAConfigError(_ maxTurns: Int) throws {
        let error = try #require(configError { try Agent(model: model, maxTurns: maxTurns) })
        #expect(error.code == "config")
    }

    @Test func unreachableProviderIsATransportError() async throws {
        let agent = try Agent(model: model)
        do {
            _ = try await agent.run("Hello?")
            Issue.record("the run should fail")
        } catch let error as AmbitError {
            #expect(error.code == "model_transport", "\(error)")
        }
    }
}

struct Raising: AmbitTool {
    struct Plain: Error {}
    let name = "raising"
    let description = "Always fails."
    let parameters = #"{"type":"object"}"#
    let localized: Bool
    func call(arguments: [String: Any]) async throws -> String {
        if localized { throw ToolError("no data for \(arguments["city"] as? String ?? "?")") }
        throw Plain()
    }
}

@Suite struct ToolAdapterTests {
    func failure(_ tool: any AmbitTool, _ json: String) async -> String? {
        do {
            _ = try await ToolAdapter(tool).call(argumentsJson: json, task: 0, credentialsJson: "{}", context: 0)
            return nil
        } catch let HostToolError.Failed(message) {
            return message
        } catch {
            return "unexpected \(error)"
        }
    }

    @Test func thrownErrorsKeepTheirMessage() async {
        #expect(await failure(Raising(localized: true), #"{"city":"Oslo"}"#) == "no data for Oslo")
        #expect(await failure(Raising(localized: false), "{}") == "Plain()")
    }

    @Test func argumentsAreDecoded() async throws {
        #expect(try await ToolAdapter(NamedTool()).call(argumentsJson: #"{"city":"Oslo"}"#, task: 0, credentialsJson: "{}", context: 0) == "sunny")
        #expect(await failure(NamedTool(), "[1]")?.contains("not a JSON object") == true)
    }
}
