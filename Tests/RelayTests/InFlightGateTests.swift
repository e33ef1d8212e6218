import APNsCore
import Testing
@testable import Relay

@Suite struct InFlightGateTests {
    private static let held = InFlightGate.Changes(urgent: true, bulk: true)
    private static let resumed = InFlightGate.Changes(urgent: false, bulk: false)
    private static let none = InFlightGate.Changes()

    @Test func holdsAtEitherBoundAndResumesBelowBothLowWaterMarks() {
        var gate = InFlightGate(limits: .init(maxEvents: 4, maxBytes: 1000, resumeFraction: 0.5, urgentShare: 0))
        do { let result = gate.admit(bytes: 10); #expect(result == Self.none) }
        do { let result = gate.admit(bytes: 10); #expect(result == Self.none) }
        do { let result = gate.admit(bytes: 10); #expect(result == Self.none) }
        do { let result = gate.admit(bytes: 10); #expect(result == Self.held) }
        do { let result = gate.admit(bytes: 10); #expect(result == Self.none, "already held: no second hold") }
        do { let result = gate.release(bytes: 10); #expect(result == Self.none) }
        do { let result = gate.release(bytes: 10); #expect(result == Self.none) }
        do { let result = gate.release(bytes: 10); #expect(result == Self.resumed) }
        #expect(!gate.isPaused)
        _ = gate.release(bytes: 10)
        _ = gate.release(bytes: 10)
        #expect(gate.events == 0 && gate.bytes == 0)

        do { let result = gate.admit(bytes: 990); #expect(result == Self.none) }
        do { let result = gate.admit(bytes: 10); #expect(result == Self.held, "bytes bound") }
        do { let result = gate.release(bytes: 10); #expect(result == Self.none, "bytes still above low water") }
        do { let result = gate.release(bytes: 990); #expect(result == Self.resumed) }
        #expect(gate.events == 0 && gate.bytes == 0)
    }

    /// Bulk stops at the bound less the urgent share; urgent goes on to the full bound.
    @Test func bulkNeverTakesTheUrgentShare() {
        var gate = InFlightGate(limits: .init(maxEvents: 10, maxBytes: 1 << 20, resumeFraction: 0.5, urgentShare: 0.2))
        #expect(gate.bulkEventLimit == 8)
        for index in 1...7 { #expect(gate.admit(bytes: 1, lane: .bulk) == Self.none, "bulk event \(index)") }
        #expect(gate.admit(bytes: 1, lane: .bulk) == InFlightGate.Changes(bulk: true), "the 8th bulk event reaches bulk's bound")
        #expect(gate.isHeld(.bulk) && !gate.isHeld(.urgent))
        #expect(gate.admit(bytes: 1, lane: .urgent) == Self.none, "urgent has its share")
        #expect(gate.admit(bytes: 1, lane: .urgent) == InFlightGate.Changes(urgent: true), "the full bound holds urgent, too")
        #expect(gate.events(in: .urgent) == 2 && gate.events(in: .bulk) == 8)
        // Down to low water: bulk's 4 of 8, and 5 of 10 overall.
        #expect(gate.release(bytes: 1, lane: .urgent) == Self.none)
        for _ in 1...3 { #expect(gate.release(bytes: 1, lane: .bulk) == Self.none) }
        #expect(gate.release(bytes: 1, lane: .bulk) == Self.resumed)
        #expect(!gate.isPaused)
    }

    /// Urgent may use what bulk leaves free: with bulk idle, urgent alone reaches the full bound.
    @Test func urgentUsesWhatBulkLeavesFree() {
        var gate = InFlightGate(limits: .init(maxEvents: 10, maxBytes: 1 << 20, resumeFraction: 0.5, urgentShare: 0.2))
        for _ in 1...9 { #expect(gate.admit(bytes: 1, lane: .urgent) == Self.none) }
        #expect(gate.admit(bytes: 1, lane: .urgent) == Self.held, "the full bound holds both lanes")
        for _ in 1...4 { #expect(gate.release(bytes: 1, lane: .urgent) == Self.none) }
        #expect(gate.release(bytes: 1, lane: .urgent) == Self.resumed)
    }
}
