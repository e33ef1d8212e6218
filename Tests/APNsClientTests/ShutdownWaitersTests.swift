import ServiceSupport
import Testing
@testable import APNsClient

/// Who waits in `ConnectionPool.shutdown(deadline:)`, and when each is resumed, without I/O.
@Suite struct ShutdownWaitersTests {
    private let start = MonotonicInstant.now

    private func at(_ milliseconds: Int64) -> MonotonicInstant { start.advanced(by: .milliseconds(milliseconds)) }

    /// The lost wake-up: a caller arriving after its deadline (its timer may already have fired) is resumed at
    /// once instead of waiting for the last connection to close.
    @Test func aCallerPastItsDeadlineDoesNotWait() {
        var waiters = ShutdownWaiters<String>()
        let atTheDeadline = waiters.wait("late", until: at(100), now: at(100), drained: false)
        let afterIt = waiters.wait("later", until: at(100), now: at(250), drained: false)
        #expect(!atTheDeadline && !afterIt)
        #expect(waiters.isEmpty)
    }

    @Test func aDrainedPoolKeepsNobodyWaiting() {
        var waiters = ShutdownWaiters<String>()
        let waits = waiters.wait("a", until: at(5_000), now: at(0), drained: true)
        #expect(!waits && waiters.isEmpty)
    }

    @Test func eachWaiterIsResumedByItsOwnDeadlineOrByTheDrain() {
        var waiters = ShutdownWaiters<String>()
        let waits = ["short": 100, "long": 1_000, "longer": 2_000].sorted { $0.value < $1.value }.map { name, deadline in
            waiters.wait(name, until: at(Int64(deadline)), now: at(0), drained: false)
        }
        #expect(waits == [true, true, true])
        let early = waiters.due(now: at(99))
        let onTime = waiters.due(now: at(100))
        let again = waiters.due(now: at(500))
        #expect(early.isEmpty)
        #expect(onTime == ["short"], "a deadline is due at its instant")
        #expect(again.isEmpty, "resumed once")
        let drained = waiters.drained()
        let afterwards = waiters.due(now: at(5_000))
        #expect(drained == ["long", "longer"])
        #expect(waiters.isEmpty && afterwards.isEmpty)
    }
}
