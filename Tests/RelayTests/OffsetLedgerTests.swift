@testable import Relay
import TestSupport
import Testing

@Suite struct OffsetLedgerTests {
    @Test func storesOffsetOnlyAfterEarlierOffsetsComplete() {
        var ledger = OffsetLedger<Int>()
        for offset in 10...14 { let begun = ledger.begin(0, offset: Int64(offset)); #expect(begun == .begun) }
        do { let result = ledger.finish(0, offset: 12); #expect(result == nil) }
        do { let result = ledger.finish(0, offset: 11); #expect(result == nil) }
        #expect(ledger.frontier(0) == nil)
        do { let result = ledger.finish(0, offset: 10); #expect(result == 13) }
        #expect(ledger.inFlight(0) == 2)
        do { let result = ledger.finish(0, offset: 14); #expect(result == nil) }
        do { let result = ledger.finish(0, offset: 13); #expect(result == 15) }
        #expect(ledger.inFlight(0) == 0)
    }

    @Test func toleratesGapsBetweenOffsets() {
        var ledger = OffsetLedger<Int>()
        ledger.begin(0, offset: 5)
        ledger.begin(0, offset: 9)
        do { let result = ledger.finish(0, offset: 9); #expect(result == nil) }
        do { let result = ledger.finish(0, offset: 5); #expect(result == 10) }
    }

    /// The frontier steps over offsets never begun (compaction, transaction markers) and counts it: on a
    /// topic without either, a count above zero means an offset came late or never.
    @Test func countsTheGapsTheFrontierStepsOver() {
        var ledger = OffsetLedger<Int>()
        for offset: Int64 in [5, 6, 9, 10] { ledger.begin(0, offset: offset) }
        for offset: Int64 in [5, 6, 9, 10] { _ = ledger.finish(0, offset: offset) }
        #expect(ledger.frontier(0) == 11)
        #expect(ledger.gapsSteppedOver == 1, "7 and 8 were never begun")
        ledger.begin(1, offset: 0)
        _ = ledger.finish(1, offset: 0)
        #expect(ledger.gapsSteppedOver == 1, "a first offset is no gap")
        #expect(ledger.seenBelowFrontier == 0)
        #expect(ledger.begin(0, offset: 7) == .seen, "below the frontier: taken as done")
        #expect(ledger.seenBelowFrontier == 1)
    }

    @Test func partitionsAreIndependent() {
        var ledger = OffsetLedger<String>()
        ledger.begin("a", offset: 0)
        ledger.begin("b", offset: 0)
        do { let result = ledger.finish("b", offset: 0); #expect(result == 1) }
        #expect(ledger.frontier("a") == nil)
        #expect(ledger.totalInFlight == 1)
    }

    @Test func refusesRedeliveredOrStaleOffsetsAndDoubleFinish() {
        var ledger = OffsetLedger<Int>()
        do { let result = ledger.begin(0, offset: 3); #expect(result == .begun) }
        do { let result = ledger.begin(0, offset: 3); #expect(result == .seen) }
        do { let result = ledger.finish(0, offset: 3); #expect(result == 4) }
        do { let result = ledger.finish(0, offset: 3); #expect(result == nil) }
        do { let result = ledger.begin(0, offset: 3); #expect(result == .seen) }
        do { let result = ledger.begin(0, offset: 2); #expect(result == .seen, "below the frontier: done") }
        do { let result = ledger.finish(0, offset: 99); #expect(result == nil) }
        do { let result = ledger.finish(7, offset: 0); #expect(result == nil) }
    }

    @Test func releaseAbandonsUnfinishedWork() {
        var ledger = OffsetLedger<Int>()
        ledger.begin(0, offset: 0)
        ledger.begin(0, offset: 1)
        _ = ledger.finish(0, offset: 1)
        do { let result = ledger.release(0); #expect(result == 1) }
        #expect(ledger.frontier(0) == nil)
        do { let result = ledger.begin(0, offset: 0); #expect(result == .begun) }
    }

    /// An offset delivered after later ones of its partition (librdkafka restarting a fetch, out of order)
    /// was skipped as "already seen", and the frontier then passed it: the event was never answered. It is
    /// begun now, and the frontier waits for it.
    @Test func aLateOffsetIsBegunAndHoldsTheFrontier() {
        var ledger = OffsetLedger<Int>()
        #expect(ledger.begin(0, offset: 1) == .begun)
        #expect(ledger.begin(0, offset: 2) == .begun)
        #expect(ledger.begin(0, offset: 0) == .late)
        #expect(ledger.begin(0, offset: 0) == .seen, "once begun, a redelivery")
        #expect(ledger.finish(0, offset: 1) == nil, "0 is still in flight")
        #expect(ledger.finish(0, offset: 2) == nil)
        #expect(ledger.finish(0, offset: 0) == 3)
        #expect(ledger.totalInFlight == 0)
    }

    @Test func randomCompletionOrderMatchesAReferenceModel() {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<50 {
            var ledger = OffsetLedger<Int>()
            let count = Int.random(in: 1...3000, using: &generator)
            for offset in 0..<count { ledger.begin(0, offset: Int64(offset * 2)) }
            var order = Array(0..<count)
            order.shuffle(using: &generator)
            var done = Set<Int>()
            var stored: Int64 = 0
            var prefix = 0
            for index in order {
                done.insert(index)
                if let frontier = ledger.finish(0, offset: Int64(index * 2)) {
                    #expect(frontier > stored)
                    stored = frontier
                }
                // Reference: the frontier is one past the end of the longest finished prefix.
                while done.contains(prefix) { prefix += 1 }
                let expected: Int64? = prefix == 0 ? nil : Int64((prefix - 1) * 2 + 1)
                #expect(ledger.frontier(0) == expected)
            }
            #expect(stored == Int64((count - 1) * 2 + 1))
        }
    }
}
