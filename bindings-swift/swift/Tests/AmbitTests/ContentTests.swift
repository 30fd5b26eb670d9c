import Foundation
import Testing

@testable import Ambit

/// Images and files in (issue 17, part 3) through the typed API: `run(parts:)` with `Data`, and a bad part
/// refused by name before anything is sent. (The scenario files `parts_input_*` and `tool_image_*` run in
/// ScenarioTests too, a tool's image through `toolContent`.)
@Suite struct ContentTests {
    static let png = Data(
        base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")!

    @Test func typedPartsRunAndAMislabelledImageIsRefusedByName() async throws {
        let agent = try Agent(model: .testModel([.text("a green dot")]), tools: [])
        let result = try await agent.run(parts: [
            .text("What is this?"), .image(Self.png),
            .file(Data("%PDF-1.4\n".utf8), mediaType: "application/pdf", filename: "r.pdf"),
        ])
        #expect(result.output == "a green dot")
        #expect(result.messages.first == .user("What is this?\n[image image/png, 69 bytes]\n[file r.pdf application/pdf, 9 bytes]"))
        do {
            _ = try await agent.run(parts: [.text("hi"), .image(Self.png, mediaType: "image/jpeg")])
            Issue.record("a PNG labelled JPEG was taken")
        } catch let AmbitError.invalidMessage(index, field, message) {
            #expect(index == 0 && field == "parts[1]")
            #expect(message.contains("labelled image/jpeg, but the bytes are image/png"))
        }
    }
    /// `vision: true` offers `image_render`; the control, without it, does not.
    @Test func visionOffersImageRenderAndItsAbsenceDoesNot() throws {
        let model: Model = .testModel([.text("ok")])
        #expect(try Agent(model: model, vision: true).toolNames.contains("image_render"))
        #expect(try !Agent(model: model).toolNames.contains("image_render"))
    }

    /// A session turn of parts is stored: the next turn, through a new store handle on the same SQLite
    /// file (as another process), sends the same image bytes again. A refused part stores nothing.
    @Test func aSessionTurnOfPartsIsSentAgainFromANewStoreHandle() async throws {
        let seen = SeenImages()
        let model: Model = .functionModel { request in
            // The JSON text escapes '/' (JSONSerialization): unescaped before looking for the base64.
            let json = request.bodyJSON.replacingOccurrences(of: "\\/", with: "/")
            seen.add(json.contains(Self.png.base64EncodedString()))
            return .text("reply \(request.index)")
        }
        let agent = try Agent(model: model)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-parts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = "sqlite://" + dir.appendingPathComponent("sessions.db").path
        let first = try await Sessions.open(url)
        let sid = try await first.create()
        do {
            _ = try await first.run(agent, sessionId: sid, parts: [.text("hi"), .image(Self.png, mediaType: "image/jpeg")])
            Issue.record("a PNG labelled JPEG was taken")
        } catch let error as SessionError {
            #expect(error.code == "invalid_message")
            #expect(error.description.contains("labelled image/jpeg, but the bytes are image/png"))
        }
        let entries = try JSONSerialization.jsonObject(with: Data(try await first.entriesJSON(sid).utf8)) as? [Any]
        #expect(entries?.isEmpty == true, "a refused turn stored nothing")
        #expect(seen.all.isEmpty)
        _ = try await first.run(agent, sessionId: sid, parts: [.text("What is this?"), .image(Self.png)])
        let second = try await Sessions.open(url)
        let result = try await second.run(agent, sessionId: sid, input: "Which colour?")
        #expect(result.output == "reply 2")
        #expect(seen.all == [true, true])
    }
}

/// Whether each request a function model got carried the image (in order).
final class SeenImages: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [Bool] = []
    func add(_ b: Bool) { lock.withLock { seen.append(b) } }
    var all: [Bool] { lock.withLock { seen } }
}
