// The work ledger from Swift, on SQLite: claim -> record -> list, an atomic batch rejected whole, the
// fingerprint health counts, the backlog report and the drain decision, and the agent tools of a routine.

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

    @Test func grantReasonCountsShowUnstableFingerprints() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        let first = try await ledger.claim("s", ["A", "B", "C"], fingerprints: ["A": "1", "B": "1", "C": "1"],
                                           limit: 3, runId: "run-1")
        _ = try await ledger.record("s", first.map { WorkRecord($0.subjectKey, .empty, token: $0.token) }, runId: "run-1")
        // Still cooling down: A and B come back because their fingerprints changed, C is skipped.
        let second = try await ledger.claim("s", ["A", "B", "C"], fingerprints: ["A": "2", "B": "2", "C": "1"],
                                            limit: 3, runId: "run-2")
        #expect(second.map(\.grantReason) == [.fingerprintChanged, .fingerprintChanged, nil])
        #expect(second[2].skipReason == .coolingDown)
        let counts = try await ledger.grantReasonCounts("s")
        #expect(counts == GrantReasonCounts(fresh: 1, cooldownExpired: 0, fingerprintChanged: 2,
                                            fingerprintsLookUnstable: true))
        let empty = try await ledger.grantReasonCounts("nothing")
        #expect(empty.fresh + empty.cooldownExpired + empty.fingerprintChanged == 0 && !empty.fingerprintsLookUnstable)
    }

    @Test func backlogReportAndDrainDecision() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        let limits = RoutineLimits(parallelLimit: 4)
        let claim = try await ledger.claim("q", ["K1", "K2"], limit: 2, runId: "run-1", routineId: "rt")
        #expect(claim.allSatisfy { $0.granted })
        // K1 and K2 are in flight: 5 of the 7 keys are workable, 3 at a time: 2 extra runs.
        let keys = (1...7).map { "K\($0)" }
        let report = try await ledger.reportBacklog("rt", keys, batchSize: 3, limits: limits, runId: "run-1")
        #expect(report == BacklogReport(routineId: "rt", scope: "q", workable: 5, extraRuns: 2))
        let capped = try await ledger.reportBacklog(
            "rt", keys, batchSize: 1, limits: RoutineLimits(parallelLimit: 9, dailyCap: 3, running: 1, startedToday: 1),
            runId: "run-1")
        #expect(capped.extraRuns == 2)  // three a day, one of them started already
        let go = try await ledger.drainDecision("rt", runId: "run-1", limits: limits)
        #expect(go.stop == nil && go.startRuns > 0)
        // A run that claimed nothing found the queue empty; one that never reported stops the drain too.
        #expect(try await ledger.drainDecision("rt", runId: "run-idle", limits: limits).stop == .queueEmpty)
        _ = try await ledger.claim("q", ["K3"], limit: 1, runId: "run-2", routineId: "rt")
        #expect(try await ledger.drainDecision("rt", runId: "run-2", limits: limits).stop == .runDidNotReport)
        let none = try await ledger.reportBacklog("rt", ["K1", "K2", "K3"], batchSize: 1, limits: limits, runId: "run-2")
        #expect(none.workable == 0 && none.extraRuns == 0)
        #expect(try await ledger.drainDecision("rt", runId: "run-2", limits: limits).stop == .nothingWorkable)
        do {
            _ = try await ledger.reportBacklog("rt", keys, batchSize: 0)
            Issue.record("a zero batch size should have been refused")
        } catch let error as LedgerError {
            #expect(error.code == "ledger_invalid_argument")
        }
    }

    @Test func anAgentGetsTheToolsOfARoutineRun() async throws {
        let ledger = try await Ledger.open(ledgerURL())
        let tools = try ledger.tools(scope: "po.tracking", routineId: "po-tracker", runId: "run-1", limit: 3)
        #expect(try tools.names == ["claim_work", "record_work", "list_work_ledger", "report_backlog"])
        let agent = try Agent(model: Model(wire: .openAiChat, name: "gpt-4.1", baseURL: "http://127.0.0.1:9/v1",
                                           apiKey: "k", stream: false, maxRetries: 0),
                              ledger: tools)
        #expect(try agent.toolNames == tools.names)
    }
}
