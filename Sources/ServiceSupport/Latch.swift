import Synchronization

/// A one-shot event that carries a value: set once (the first value wins), awaited by any number of tasks,
/// each wait with its own deadline. E.g. "the consumer has closed", "the producer hit a fatal error".
package final class Latch<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [DeadlineWaiter<Value?>] = []
    }

    private let state = Mutex(State())
    /// `isSet` without the lock: hot paths ask it for every record (e.g. "has the producer failed?"), from
    /// several threads at once, and contended a lock that is almost never set.
    private let setFlag = Atomic<Bool>(false)

    package init() {}

    /// The value, once set.
    package var value: Value? { state.withLock { $0.value } }

    package var isSet: Bool { setFlag.load(ordering: .acquiring) }

    /// Sets the value and wakes every waiter, unless a value was set before.
    /// - Returns: `true` if this call set it.
    @discardableResult
    package func set(_ value: Value) -> Bool {
        let waiters = state.withLock { state -> [DeadlineWaiter<Value?>]? in
            guard state.value == nil else { return nil }
            state.value = value
            setFlag.store(true, ordering: .releasing)
            defer { state.waiters = [] }
            return state.waiters
        }
        guard let waiters else { return false }
        waiters.forEach { $0.resolve(value) }
        return true
    }

    /// Waits for the value.
    /// - Parameters:
    ///   - timeout: `nil` waits without a deadline (for callers bounded by something else).
    ///   - ignoringCancellation: keep waiting when the task is cancelled (the deadline still applies).
    /// - Returns: the value, or `nil` if the deadline passed or the task was cancelled first.
    package func wait(timeout: Duration? = nil, ignoringCancellation: Bool = false) async -> Value? {
        await DeadlineWaiter<Value?>.wait(timeout: timeout, timedOut: nil, cancelled: ignoringCancellation ? nil : .some(nil)) { waiter in
            let value = state.withLock { state -> Value? in
                if let value = state.value { return value }
                state.waiters.removeAll { $0.isResolved }  // earlier waits that timed out
                state.waiters.append(waiter)
                return nil
            }
            if let value { waiter.resolve(value) }
        }
    }
}

extension Latch where Value == Void {
    /// Sets the event (for latches that carry no value).
    @discardableResult
    package func set() -> Bool { set(()) }
}
