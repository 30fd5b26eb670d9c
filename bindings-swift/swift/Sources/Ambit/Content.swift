import Foundation

/// One piece of a message's content: text, an image (its bytes, or a URL the provider fetches) or a
/// document (PDF or text). `agent.run(parts: [.text("What is this?"), .image(data)])` sends them in
/// each wire's own content blocks; a tool returns images with `toolContent([...])`. The core checks each
/// part before anything is sent: one over its byte cap, or whose bytes are not the media type it names,
/// throws `AmbitError.invalidMessage` naming it (`messages[0].parts[1]`).
public enum Part: Sendable, Equatable {
    case text(String)
    /// PNG, JPEG, GIF or WebP bytes; `mediaType` nil reads the type from them.
    case image(Data, mediaType: String? = nil)
    case imageURL(String)
    /// `application/pdf` or `text/plain`.
    case file(Data, mediaType: String, filename: String)

    /// The part in the core's JSON form.
    var json: [String: String] {
        switch self {
        case let .text(t): return ["type": "text", "text": t]
        case let .image(data, mediaType):
            return ["type": "image", "media_type": mediaType ?? "", "data": data.base64EncodedString()]
        case let .imageURL(url): return ["type": "image_url", "url": url]
        case let .file(data, mediaType, filename):
            return ["type": "file", "media_type": mediaType, "filename": filename, "data": data.base64EncodedString()]
        }
    }
}

/// A tool's result made of parts (text and images): return it from `call(arguments:)` and the images
/// reach the model in the wire's tool-result blocks; the call's recorded result describes them. Only
/// this typed return makes parts: a string a tool returns otherwise stays a string, whatever it holds.
public func toolContent(_ parts: [Part]) -> String {
    let body = ["$ambit_content": parts.map(\.json)]
    let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data("{}".utf8)
    // The core's tag marks it as the typed return it is: a plain string never reads as content.
    return ((try? hostContentTag()) ?? "") + String(decoding: data, as: UTF8.self)
}

extension Agent {
    /// Runs the agent on one user message made of parts (text, images, files).
    public func run(parts: [Part], context: (any Sendable)? = nil) async throws -> RunResult {
        try await run(messagesJSON: Self.partsJSON(parts), context: context)
    }

    /// `run(parts:)`, yielding the run's events.
    public func stream(parts: [Part], context: (any Sendable)? = nil) -> AsyncThrowingStream<AgentEvent, any Error> {
        stream(messagesJSON: Self.partsJSON(parts), context: context)
    }

    static func partsJSON(_ parts: [Part]) -> String {
        let message: [String: Any] = ["role": "user", "content": parts.map(\.json)]
        let data = (try? JSONSerialization.data(withJSONObject: [message])) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
