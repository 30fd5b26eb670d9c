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
}
