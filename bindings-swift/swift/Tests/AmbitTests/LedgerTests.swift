// The work ledger from Swift, on SQLite: claim -> record -> list, and an atomic batch rejected whole.

import Foundation
import Testing

@testable import Ambit

func ledgerURL() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ambit-ledger-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return "sqlite://" + dir.appendingPathComponent("ledger.db").path
}

@Suite struct LedgerTests {
    @Test func claimRecordList() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        let claim = try await ledger.claim("po.tracking", ["PO-1", "PO-2", "PO-3"], limit: 2, runId: "run-1")
        #expect(claim.map(\.grantReason) == [.fresh, .fresh, nil])
        #expect(claim[2].skipReason == .overLimit)
        let again = try await ledger.claim("po.tracking", ["PO-1"], limit: 1, runId: "run-2")
        #expect(again[0].skipReason == .inFlight)

        let done = try await ledger.record(
            "po.tracking", [WorkRecord("PO-1", .empty, token: claim[0].token), WorkRecord("PO-2", .productive)],
            runId: "run-1")
        #expect(done.map(\.misses) == [1, 0])

        let rows = try await ledger.list(scope: "po.tracking")
        #expect(rows.map(\.subjectKey) == ["PO-1", "PO-2"])
        #expect(rows.allSatisfy { $0.state == .coolingDown && $0.lastGrantReason == .fresh })
        #expect(try await ledger.list(state: "eligible").isEmpty)
    }

    @Test func badBatchIsRejectedWhole() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        _ = try await ledger.claim("s", ["A", "B"], limit: 2, runId: "run-1")
        let good = WorkRecord("A", .empty)
        let cases: [([WorkRecord], String)] = [
            ([good, WorkRecord(subjectKey: "B", outcome: "done", token: nil, fingerprint: nil)], "ledger_invalid_batch"),
            ([good, WorkRecord(subjectKey: "", outcome: "empty", token: nil, fingerprint: nil)], "ledger_invalid_batch"),
            ([good, WorkRecord("A", .failed)], "ledger_invalid_batch"),
            ([good, WorkRecord("C", .empty)], "ledger_not_claimed"),
        ]
        for (batch, code) in cases {
            do {
                _ = try await ledger.record("s", batch, runId: "run-1")
                Issue.record("the batch should have been rejected")
            } catch let error as LedgerError {
                #expect(error.code == code)
            }
        }
        let rows = try await ledger.list(scope: "s")
        #expect(rows.map { [$0.subjectKey, "\($0.attempts)", "\($0.misses)"] } == [["A", "1", "0"], ["B", "1", "0"]])
        #expect(rows.allSatisfy { $0.state == .inFlight })
    }

    @Test func scopePinningAndBadURLs() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        _ = try await ledger.claim("a", ["X"], limit: 1, routineId: "rt")
        do {
            _ = try await ledger.claim("b", ["X"], limit: 1, routineId: "rt")
            Issue.record("the claim should have been refused")
        } catch LedgerError.scopePinned(_, let pinned, _, _) {
            #expect(pinned == "a")
        }
        do {
            _ = try await Ledger.open("mysql://nope")
            Issue.record("the URL should have been refused")
        } catch let error as LedgerError {
            #expect(error.code == "ledger_invalid_argument")
        }
    }
}
