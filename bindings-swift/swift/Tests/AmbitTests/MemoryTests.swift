// Memory from Swift, on SQLite (and PostgreSQL when the suite has a server): remember -> recall ->
// forget -> list -> export, a key updated in place, typed refusals naming the field, and an agent given a
// memory store gets the memory tools (and one without, none).

import Foundation
import Testing

@testable import Ambit

func memoryURL() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-memory-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return "sqlite://" + dir.appendingPathComponent("memory.db").path
}

@Suite struct MemoryTests {
    @Test func rememberRecallForgetListExport() async throws {
        let memory = try await Memory.open(memoryURL())
        let saved = try await memory.remember(
            "ops", body: "Refunds over 500 EUR need a second approver from finance.", title: "Refund limit",
            kind: .instruction, tags: ["Billing"], salience: 8)
        #expect(saved.created)
        #expect(saved.memory.tags == ["billing"])
        let other = try await memory.remember("ops", body: "The office wifi is Acme-Guest.", key: "wifi")
        #expect(try await memory.recall("ops", query: "who approves large refunds").map(\.id) == [saved.memory.id])
        #expect(try await memory.recall("ops").map(\.id) == [saved.memory.id, other.memory.id])
        #expect(try await memory.recall("ops", tags: ["billing"], kind: .instruction).map(\.id) == [saved.memory.id])
        let updated = try await memory.remember("ops", salience: 9, key: "wifi")
        #expect(!updated.created && updated.memory.id == other.memory.id)
        #expect(updated.memory.body == "The office wifi is Acme-Guest." && updated.memory.salience == 9)
        #expect(try await memory.list("ops").map(\.id) == [saved.memory.id, other.memory.id])
        let export = try JSONSerialization.jsonObject(with: Data(try await memory.export("ops").utf8)) as? [String: Any]
        #expect((export?["memories"] as? [Any])?.count == 2)
        #expect(try await memory.forget("ops", key: "wifi"))
        #expect(!(try await memory.forget("ops", id: other.memory.id)))
        #expect(try await memory.forget("ops", id: saved.memory.id))
        #expect(try await memory.list("ops").isEmpty)
    }

    @Test func refusalsAreTypedAndNameTheField() async throws {
        let memory = try await Memory.open(memoryURL())
        func field(_ body: () async throws -> Void) async -> String? {
            do {
                try await body()
                return nil
            } catch let MemoryError.invalidArgument(field, _) {
                return field
            } catch {
                return "other: \(error)"
            }
        }
        #expect(await field { try await memory.remember("a", body: String(repeating: "x", count: 8193)) } == "body")
        #expect(await field { try await memory.remember("a", body: "b", title: String(repeating: "t", count: 201)) } == "title")
        #expect(await field { try await memory.remember("a", body: "b", salience: 11) } == "salience")
        #expect(await field { try await memory.remember("a", body: "b", tags: [String(repeating: "x", count: 65)]) } == "tags")
        #expect(await field { _ = try await memory.recall("a", limit: 51) } == "limit")
        #expect(await field { try await memory.forget("a") } == "id")
        #expect(await field { _ = try await Memory.open("mysql://nope") } == "url")
        // Negative control: at the limits it is accepted.
        try await memory.remember(
            "a", body: String(repeating: "x", count: 8192), title: String(repeating: "t", count: 200), tags: [String(repeating: "x", count: 64)],
            salience: 10)
        do {
            try await memory.remember("a", body: "b", salience: 0)
            Issue.record("salience 0 was accepted")
        } catch let e as MemoryError {
            #expect(e.code == "memory_invalid_argument")
        }
    }

    @Test func anAgentHasMemoryToolsOnlyWithMemory() async throws {
        let memory = try await Memory.open(memoryURL())
        let model = Model.openAIChat("gpt-4.1")
        let with = try Agent(model: model, memory: memory, agentName: "bot")
        #expect(try with.core.toolNames() == [
            "memory_recall", "memory_caller_context", "memory_remember", "memory_forget", "memory_record_preference",
        ])
        let without = try Agent(model: model)
        #expect(try without.core.toolNames().filter { $0.hasPrefix("memory_") }.isEmpty)
        #expect(throws: AmbitError.self) { try Agent(model: model, memory: memory) }
        #expect(throws: AmbitError.self) { try Agent(model: model, memory: memory, agentName: " ") }
    }
}
