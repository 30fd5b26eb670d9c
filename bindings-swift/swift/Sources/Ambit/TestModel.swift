// Models for testing your own agents: `Model.testModel(_:)` answers from a script, `Model.functionModel`
// with a function of each request. Neither reaches a network, yet both speak a real wire: the core writes
// each request as that wire's body and reads each reply back through the same decoder a hosted model's
// answer goes through, so a test on them exercises ambit's real decoding (streamed or not).

import Foundation

/// A tool call in a test model's `Reply`.
public struct ReplyCall: Sendable, Equatable {
    public var name: String
    /// The arguments, as a JSON object's text.
    public var argumentsJSON: String
    /// The call's id; nil: `call_<request>_<index>`.
    public var id: String?

    public init(name: String, argumentsJSON: String = "{}", id: String? = nil) {
        self.name = name
        self.argumentsJSON = argumentsJSON
        self.id = id
    }
}

/// One answer of a test model: text, tool calls, or both, with the token counts to report.
public struct Reply: Sendable, Equatable {
    public var content: String?
    public var toolCalls: [ReplyCall]
    public var inputTokens: Int
    public var outputTokens: Int

    public init(content: String? = nil, toolCalls: [ReplyCall] = [], inputTokens: Int = 0, outputTokens: Int = 0) {
        self.content = content
        self.toolCalls = toolCalls
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
    }

    /// A text answer.
    public static func text(_ text: String) -> Reply { Reply(content: text) }

    /// An answer asking for one tool call; `arguments` is a JSON object's text.
    public static func toolCall(_ name: String, arguments: String = "{}", id: String? = nil) -> Reply {
        Reply(toolCalls: [ReplyCall(name: name, argumentsJSON: arguments, id: id)])
    }

    /// The core's form. Arguments that are not JSON go as a string, which the core refuses by name.
    func json() -> [String: Any] {
        var out: [String: Any] = [
            "tool_calls": toolCalls.map { call -> [String: Any] in
                let args = (try? JSONSerialization.jsonObject(with: Data(call.argumentsJSON.utf8), options: [.fragmentsAllowed]))
                    ?? call.argumentsJSON
                var c: [String: Any] = ["name": call.name, "arguments": args]
                if let id = call.id { c["id"] = id }
                return c
            },
            "usage": ["input_tokens": inputTokens, "output_tokens": outputTokens],
        ]
        if let content { out["content"] = content }
        return out
    }
}

/// What a function model is asked: the request's number (from 1), the wire and model name, the system
/// prompt, the conversation so far (provider-neutral messages, as JSON text: `role` `user`, `assistant`
/// with `tool_calls`, `tool` with `call_id`), the names of the tools offered, and `bodyJSON`: the wire's
/// request body as a hosted model would get it.
public struct TestRequest: Sendable {
    public let index: Int
    public let wire: String
    public let model: String
    public let instructions: String?
    public let messagesJSON: String
    public let toolNames: [String]
    public let bodyJSON: String

    /// The conversation, decoded.
    public var messages: [[String: Any]] {
        (try? JSONSerialization.jsonObject(with: Data(messagesJSON.utf8))) as? [[String: Any]] ?? []
    }

    /// The wire's request body, decoded.
    public var body: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(bodyJSON.utf8))) as? [String: Any] ?? [:]
    }

    /// The text of the last user message, if any.
    public var lastUserMessage: String? {
        messages.last { ($0["role"] as? String) == "user" }?["content"] as? String
    }

    init(json: String) throws {
        guard let raw = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw ToolError("a test model request is not a JSON object")
        }
        func text(_ v: Any?) throws -> String {
            guard let v else { return "null" }
            return String(decoding: try JSONSerialization.data(withJSONObject: v, options: [.fragmentsAllowed]), as: UTF8.self)
        }
        index = raw["index"] as? Int ?? 0
        wire = raw["wire"] as? String ?? ""
        model = raw["model"] as? String ?? ""
        instructions = raw["instructions"] as? String
        messagesJSON = try text(raw["messages"])
        toolNames = (raw["tools"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        bodyJSON = try text(raw["body"])
    }
}

/// A test model's script or function, carried by a `Model` to the agent it builds. Compared by identity.
final class TestBacking: @unchecked Sendable, Equatable {
    let json: String
    let function: (@Sendable (TestRequest) async throws -> Reply)?

    init(json: String, function: (@Sendable (TestRequest) async throws -> Reply)?) {
        self.json = json
        self.function = function
    }

    static func == (a: TestBacking, b: TestBacking) -> Bool { a === b }
}

/// Adapts a function model's function to the generated `HostTool` the core calls.
final class ReplyFunctionAdapter: HostTool {
    private let function: @Sendable (TestRequest) async throws -> Reply

    init(_ function: @escaping @Sendable (TestRequest) async throws -> Reply) { self.function = function }

    func call(argumentsJson: String, task: UInt64, credentialsJson: String, context: UInt64) async throws -> String {
        do {
            let reply = try await function(try TestRequest(json: argumentsJson))
            return String(decoding: try JSONSerialization.data(withJSONObject: reply.json()), as: UTF8.self)
        } catch {
            throw HostToolError.Failed(message: ToolAdapter.message(of: error))
        }
    }
}

extension Wire {
    /// The core's name of the wire.
    var coreName: String {
        switch self {
        case .openAiChat: return "openai_chat"
        case .anthropic: return "anthropic"
        case .openAiResponses: return "openai_responses"
        }
    }
}

extension Model {
    /// A model for tests answering from a script: the n-th request gets the n-th reply. A request past the
    /// script fails the run (`AmbitError.modelResponse`, naming it); a bad reply (a call without a name,
    /// arguments that are not an object) is `AmbitError.config` when the agent is built.
    ///
    /// ```swift
    /// let agent = try Agent(model: .testModel([.toolCall("get_weather", arguments: #"{"city":"Paris"}"#),
    ///                                          .text("Sunny in Paris.")]), tools: [GetWeather()])
    /// ```
    public static func testModel(_ replies: [Reply], wire: Wire = .openAiChat, name: String = "test-model",
                                 stream: Bool = false) -> Model {
        var model = Model(wire: wire, name: name, stream: stream)
        let config: [String: Any] = ["test_model": [
            "wire": wire.coreName, "model": name, "stream": stream, "replies": replies.map { $0.json() },
        ]]
        model.test = TestBacking(json: jsonText(config), function: nil)
        return model
    }

    /// A model for tests answering with `function(request)` for each `TestRequest`; a thrown error fails the
    /// run (`AmbitError.modelResponse`, naming it).
    public static func functionModel(wire: Wire = .openAiChat, name: String = "test-model", stream: Bool = false,
                                     _ function: @escaping @Sendable (TestRequest) async throws -> Reply) -> Model {
        var model = Model(wire: wire, name: name, stream: stream)
        let config: [String: Any] = ["test_model": ["wire": wire.coreName, "model": name, "stream": stream]]
        model.test = TestBacking(json: jsonText(config), function: function)
        return model
    }
}

/// JSON text of a value `JSONSerialization` can write (the test model's plain data always is).
private func jsonText(_ value: [String: Any]) -> String {
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("{}".utf8)
    return String(decoding: data, as: UTF8.self)
}
