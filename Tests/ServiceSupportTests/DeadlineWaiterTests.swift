import ServiceSupport
import Synchronization
import Testing

@Suite struct DeadlineWaiterTests {
    enum Outcome: Sendable, Equatable { case event(Int), timedOut, cancelled }

    /// A stand-in owner: a list of waiters behind a lock, as the consumer or the relay keep them.
    final class Owner: Sendable {
        let waiters = Mutex<[DeadlineWaiter<Outcome>]>([])
        func fire(_ value: Int) { waiters.withLock { list in defer { list = [] }; return list }.forEach { $0.resolve(.event(value)) } }
        var count: Int { waiters.withLock { $0.count } }
    }

    @Test func anEventResolvedAtRegistrationIsReturnedWithoutWaiting() async {
        let outcome = await DeadlineWaiter.wait(timeout: .seconds(60), timedOut: Outcome.timedOut, cancelled: .cancelled) {
            $0.resolve(.event(1))
        }
        #expect(outcome == .event(1))
    }

    @Test func anEventAfterRegistrationWakesTheWaiter() async {
        let owner = Owner()
        async let outcome = DeadlineWaiter.wait(timeout: .seconds(60), timedOut: Outcome.timedOut, cancelled: .cancelled) { waiter in
            owner.waiters.withLock { $0.append(waiter) }
        }
        await Self.eventually { owner.count == 1 }
        owner.fire(7)
        #expect(await outcome == .event(7))
    }

    @Test func theDeadlineEndsAWaitNobodyResolves() async {
        let outcome = await DeadlineWaiter.wait(timeout: .milliseconds(20), timedOut: Outcome.timedOut, cancelled: .cancelled) { _ in }
        #expect(outcome == .timedOut)
    }

    @Test func aZeroDeadlineStillTimesOut() async {
        let outcome = await DeadlineWaiter.wait(timeout: .zero, timedOut: Outcome.timedOut, cancelled: .cancelled) { _ in }
        #expect(outcome == .timedOut)
    }

    /// The order bug this type exists for: a task cancelled before its waiter is registered must not hang.
    @Test func aTaskCancelledBeforeRegistrationIsNotLost() async {
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await DeadlineWaiter.wait(timeout: nil, timedOut: Outcome.timedOut, cancelled: .cancelled) { _ in }
        }
        #expect(await task.value == .cancelled)
    }

    @Test func cancellingAParkedWaitEndsIt() async {
        let owner = Owner()
        let task = Task {
            await DeadlineWaiter.wait(timeout: nil, timedOut: Outcome.timedOut, cancelled: .cancelled) { waiter in
                owner.waiters.withLock { $0.append(waiter) }
            }
        }
        await Self.eventually { owner.count == 1 }
        task.cancel()
        #expect(await task.value == .cancelled)
    }

    @Test func onlyTheFirstResolutionCounts() async {
        let owner = Owner()
        let outcome = await DeadlineWaiter.wait(timeout: .milliseconds(10), timedOut: Outcome.timedOut, cancelled: .cancelled) { waiter in
            owner.waiters.withLock { $0.append(waiter) }
        }
        #expect(outcome == .timedOut)
        let waiter = owner.waiters.withLock { $0[0] }
        #expect(waiter.isResolved)
        #expect(waiter.resolve(.event(3)) == false)
    }

    /// Polls a cheap condition (the owner's list) with a deadline; the waiter under test runs concurrently.
    static func eventually(_ condition: @Sendable () -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("condition not met within 10 s"); return }
            await Task.yield()
        }
    }
}

@Suite struct LatchTests {
    @Test func everyWaiterGetsTheFirstValue() async {
        let latch = Latch<Int>()
        async let first = latch.wait(timeout: .seconds(60))
        async let second = latch.wait(timeout: .seconds(60))
        #expect(latch.set(1))
        #expect(!latch.set(2), "the first value wins")
        #expect(await first == 1)
        #expect(await second == 1)
        #expect(await latch.wait(timeout: .zero) == 1, "a wait after the event returns at once")
    }

    @Test func aWaitWithoutTheEventEndsAtItsDeadline() async {
        let latch = Latch<Void>()
        let happened: Void? = await latch.wait(timeout: .milliseconds(10))
        #expect(happened == nil)
        #expect(!latch.isSet)
    }
}

@Suite struct LatchCancellationTests {
    @Test func aWaitThatIgnoresCancellationStillSeesTheEvent() async {
        let latch = Latch<Int>()
        let task = Task { await latch.wait(timeout: .seconds(60), ignoringCancellation: true) }
        task.cancel()
        latch.set(5)
        #expect(await task.value == 5)
    }

    @Test func aCancelledWaitEndsWithoutTheEvent() async {
        let latch = Latch<Int>()
        let task = Task { await latch.wait(timeout: .seconds(60)) }
        task.cancel()
        #expect(await task.value == nil)
    }
}
