// Skills and knowledge from Swift (SPEC §14): the skills setting reaches the core (the writing tools only
// when agent-managed); Knowledge.publish writes text up to 200 KB, refuses to overwrite unless asked, and
// every refusal is typed and names its argument. The runs themselves are the shared scenarios
// (skills_read_search_edit, knowledge_list_read).

import Foundation
import Testing

@testable import Ambit

private func tempDir() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-kb-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.path
}

private let kbModel = Model.openAIChat("gpt-4.1", baseURL: "http://127.0.0.1:9/v1", apiKey: "k")

@Suite struct SkillsKnowledgeTests {
    @Test func skillsReadingToolsAlwaysWritingOnesOnlyWhenAgentManaged() throws {
        let dir = tempDir()
        let reading = try Agent(model: kbModel, skills: Skills(dirs: [dir]))
        #expect(try reading.listTools().map(\.name) == ["skill_read", "skill_search"])
        let managed = try Agent(model: kbModel, skills: Skills(dirs: [dir], agentManaged: true))
        #expect(try managed.listTools().map(\.name)
            == ["skill_read", "skill_search", "skill_write", "skill_edit", "skill_delete"])
        #expect(throws: AmbitError.self) { try Agent(model: kbModel, skills: Skills(dirs: [dir], indexEntries: 5000)) }
        #expect(throws: AmbitError.self) { try Agent(model: kbModel, skills: Skills(dirs: [dir], indexEntries: -1)) }
        #expect(throws: AmbitError.self) { try Agent(model: kbModel, skills: Skills(dirs: [])) }
    }

    @Test func knowledgePublishesTextUpTo200KBAndNeverOverwritesUnlessAsked() throws {
        let dir = tempDir() + "/kb"
        let kb = Knowledge(dir: dir)
        let p = try kb.publish(name: "refund-policy", content: "# Refunds\nWithin 30 days.\n")
        #expect(p.name == "refund-policy.md" && !p.replaced)
        #expect(try String(contentsOfFile: dir + "/refund-policy.md", encoding: .utf8) == "# Refunds\nWithin 30 days.\n")
        do {
            try kb.publish(name: "refund-policy.md", content: "clobbered")
            Issue.record("an existing document was overwritten")
        } catch let e as KnowledgeError {
            #expect(e.code == "knowledge_exists")
        }
        #expect(try String(contentsOfFile: dir + "/refund-policy.md", encoding: .utf8) == "# Refunds\nWithin 30 days.\n")
        #expect(try kb.publish(name: "refund-policy.md", content: "v2", overwrite: true).replaced)
        try kb.publish(name: "big.txt", content: String(repeating: "x", count: 200_000))
        for (name, content, field) in [
            ("bigger.txt", String(repeating: "x", count: 200_001), "content"),
            ("report.pdf", "%PDF", "name"),
            ("../escape", "x", "name"),
        ] {
            do {
                try kb.publish(name: name, content: content)
                Issue.record("\(name) was published")
            } catch let KnowledgeError.invalidArgument(f, _) {
                #expect(f == field, "\(name)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/bigger.txt"))
        #expect(try Agent(model: kbModel, knowledge: kb).listTools().map(\.name) == ["knowledge_list", "knowledge_read"])
        #expect(throws: AmbitError.self) { try Agent(model: kbModel, knowledge: Knowledge(dir: dir, inlineMaxBytes: 0)) }
    }
}
