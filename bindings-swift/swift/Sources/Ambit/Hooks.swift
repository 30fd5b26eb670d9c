// Hooks and guardrails: your code on the way of a run (issue 21). A `Hook` runs at one point of every
// run of the agent and may change what passes there; a `Guardrail` checks the run's input (beside the
// first model request) or its final answer, and stops the run with `AmbitError.guardrailTripped` when it
// trips. Both are async closures taking `(context, payload)`: the payload is the JSON the core hands over
// (what the model sees: tool results after the credential redactor, so `[credential:alias]`, never a
// value), as a dictionary.
//
// - `.runStart`: `["input": [messages]]`; `.runEnd`: the result's fields. Both observe: `.proceed`.
// - `.beforeModelRequest`: `turn`, `instructions`, `messages`, `tools`; `.replace(["instructions": ...])`.
// - `.afterModelResponse`: `turn`, `text`, `tool_calls`; `.replace(["text": ..., "tool_calls": [...]])`.
// - `.beforeToolCall`: `id`, `name`, `arguments`; `.replace(newArguments)` or `.refuse(reason)`.
// - `.afterToolCall`: `id`, `name`, `arguments`, `result`, `is_error`; `.replace("new result")`.
//
// A hook that throws ends the run with `AmbitError.hookFailed` naming it (its text passed through the
// credential redactor).
import Foundation

/// Where a hook runs.
public enum HookPoint: String, Sendable, CaseIterable {
    case runStart = "run_start"
    case runEnd = "run_end"
    case beforeModelRequest = "before_model_request"
    case afterModelResponse = "after_model_response"
    case beforeToolCall = "before_tool_call"
    case afterToolCall = "after_tool_call"
}

/// A hook's answer.
public enum HookAction {
    /// Go on unchanged.
    case proceed
    /// Go on with this JSON value instead (what it replaces depends on the point).
    case replace(Any)
    /// A `.beforeToolCall` hook's refusal: the call does not run; the model sees the reason.
    case refuse(String)

    func json() throws -> Any {
        switch self {
        case .proceed: return ["action": "continue"] as [String: Any]
        case let .replace(value): return ["action": "replace", "value": value] as [String: Any]
        case let .refuse(reason): return ["action": "refuse", "reason": reason] as [String: Any]
        }
    }
}

/// A guardrail's answer: `tripped` stops the run; `info` (any JSON value) is carried by
/// `AmbitError.guardrailTripped` (as its verdict) and the `guardrail_checked` event.
public struct GuardrailVerdict {
    public let tripped: Bool
    public let info: Any?

    public init(tripped: Bool, info: Any? = nil) {
        self.tripped = tripped
        self.info = info
    }

    public static let pass = GuardrailVerdict(tripped: false)
}

/// What a hook or guardrail knows of its run: its own `name` and the run's `context` (the value given
/// to `agent.run(_:context:)`; nil for a run given none). Read it with `context as? YourType`.
public struct HookContext: Sendable {
    public let name: String
    let contextID: UInt64

    public var context: (any Sendable)? { RunContexts.shared.value(contextID) }
}

/// A function run at `point` of every run: `Hook(.afterToolCall, name: "shout") { ctx, payload in ... }`.
/// `name` is what `AmbitError.hookFailed` names when it throws.
public struct Hook {
    public let point: HookPoint
    public let name: String
    let function: @Sendable (HookContext, [String: Any]) async throws -> HookAction

    public init(
        _ point: HookPoint, name: String,
        _ function: @escaping @Sendable (HookContext, [String: Any]) async throws -> HookAction
    ) {
        self.point = point
        self.name = name
        self.function = function
    }

    var settings: HookSettings {
        let (name, function) = (self.name, self.function)
        return HookSettings(name: name, point: point.rawValue, implementation: HookFunctionAdapter(name) { ctx, payload in
            try await function(ctx, payload).json()
        })
    }
}

/// A check of the run's input (`Agent(..., inputGuardrails: [...])`: the payload is `["input": the last
/// user message, "messages": [...]]`) or of its final answer (`outputGuardrails`: `["output": text,
/// "structured_output": value or null]`), answering a `GuardrailVerdict`.
public struct Guardrail {
    public let name: String
    let function: @Sendable (HookContext, [String: Any]) async throws -> GuardrailVerdict

    public init(
        name: String, _ function: @escaping @Sendable (HookContext, [String: Any]) async throws -> GuardrailVerdict
    ) {
        self.name = name
        self.function = function
    }

    func settings(kind: String) -> GuardrailSettings {
        let (name, function) = (self.name, self.function)
        return GuardrailSettings(name: name, kind: kind, implementation: HookFunctionAdapter(name) { ctx, payload in
            let verdict = try await function(ctx, payload)
            return ["tripped": verdict.tripped, "info": verdict.info ?? NSNull()] as [String: Any]
        })
    }
}

/// Adapts a hook's or guardrail's closure to the generated `HostTool` the core calls: the payload comes
/// as the arguments' JSON, the answer goes back as JSON text.
final class HookFunctionAdapter: HostTool {
    private let name: String
    private let function: @Sendable (HookContext, [String: Any]) async throws -> Any

    init(_ name: String, _ function: @escaping @Sendable (HookContext, [String: Any]) async throws -> Any) {
        self.name = name
        self.function = function
    }

    func call(argumentsJson: String, task: UInt64, credentialsJson: String, context: UInt64) async throws -> String {
        let payload = (try? JSONSerialization.jsonObject(with: Data(argumentsJson.utf8))) as? [String: Any] ?? [:]
        do {
            let answer = try await function(HookContext(name: name, contextID: context), payload)
            let data = try JSONSerialization.data(withJSONObject: answer, options: [.fragmentsAllowed])
            return String(decoding: data, as: UTF8.self)
        } catch {
            throw HostToolError.Failed(message: ToolAdapter.message(of: error))
        }
    }
}
