import Testing
@testable import Relay

@Suite struct InFlightGateTests {
    @Test func pausesAtEitherBoundAndResumesBelowBothLowWaterMarks() {
        var gate = InFlightGate(limits: .init(maxEvents: 4, maxBytes: 1000, resumeFraction: 0.5))
        do { let result = gate.admit(bytes: 10); #expect(result == .none) }
        do { let result = gate.admit(bytes: 10); #expect(result == .none) }
        do { let result = gate.admit(bytes: 10); #expect(result == .none) }
        do { let result = gate.admit(bytes: 10); #expect(result == .pause) }
        do { let result = gate.admit(bytes: 10); #expect(result == .none, "already paused: no second pause") }
        do { let result = gate.release(bytes: 10); #expect(result == .none) }
        do { let result = gate.release(bytes: 10); #expect(result == .none) }
        do { let result = gate.release(bytes: 10); #expect(result == .resume) }
        #expect(!gate.isPaused)
        _ = gate.release(bytes: 10)
        _ = gate.release(bytes: 10)
        #expect(gate.events == 0 && gate.bytes == 0)

        do { let result = gate.admit(bytes: 990); #expect(result == .none) }
        do { let result = gate.admit(bytes: 10); #expect(result == .pause, "bytes bound") }
        do { let result = gate.release(bytes: 10); #expect(result == .none, "bytes still above low water") }
        do { let result = gate.release(bytes: 990); #expect(result == .resume) }
        #expect(gate.events == 0 && gate.bytes == 0)
    }
}
