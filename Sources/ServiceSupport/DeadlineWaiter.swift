import Synchronization

/// One task's wait, resolved exactly once by whichever comes first: the event it waits for, its deadline,
/// or the cancellation of the waiting task.
///
/// Why a type of its own: a wait that registers itself, arms a timer and installs a cancellation handler
/// has three parties that can act in any order. If the timer or the cancellation fires before the waiter
/// is registered, a hand-written version loses it and the task waits forever. Here the waiter exists (and
/// can be resolved) *before* it is handed to its owner, the timer or the cancellation handler; a value that
/// arrives before the continuation is parked is kept and returned at once.
///
/// The owner keeps waiters in its own lock-protected state and calls ``resolve(_:)`` when the event
/// happens; a waiter resolved by its deadline stays in the owner's list until the owner drops it
/// (``isResolved`` says so; resolving it again is a no-op that returns `false`).
package final class DeadlineWaiter<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case parked(CheckedContinuation<Value, Never>)
        case resolved(Value)
        case delivered
    }

    private let state = Mutex(State.pending)

    init() {}

    /// Resolves the wait with `value` unless something resolved it first.
    /// - Returns: `true` if this call resolved it.
    @discardableResult
    package func resolve(_ value: Value) -> Bool {
        let continuation = state.withLock { state -> CheckedContinuation<Value, Never>?? in
            switch state {
            case .pending:
                state = .resolved(value)
                return .some(nil)
            case .parked(let continuation):
                state = .delivered
                return .some(continuation)
            case .resolved, .delivered:
                return nil
            }
        }
        guard let continuation else { return false }
        continuation?.resume(returning: value)
        return true
    }

    /// Whether the wait has an outcome already (the owner may drop it from its list).
    package var isResolved: Bool {
        state.withLock { state in
            if case .pending = state { return false }
            if case .parked = state { return false }
            return true
        }
    }

    private func value() async -> Value {
        await withCheckedContinuation { continuation in
            let early = state.withLock { state -> Value? in
                switch state {
                case .pending:
                    state = .parked(continuation)
                    return nil
                case .resolved(let value):
                    state = .delivered
                    return value
                case .parked, .delivered:
                    preconditionFailure("a DeadlineWaiter is awaited once")
                }
            }
            if let early { continuation.resume(returning: early) }
        }
    }

    /// Waits for an event with a deadline and cancellation, in the one safe order.
    ///
    /// `register` runs first and synchronously, with the new waiter: it either resolves the waiter at once
    /// (the condition already holds) or stores it where the event's side will ``resolve(_:)`` it. Only
    /// then are the deadline and the cancellation handler armed; both resolve through the same waiter, so
    /// whichever comes first wins and the others are no-ops.
    ///
    /// - Parameters:
    ///   - timeout: `nil` waits without a deadline (for callers bounded by something else).
    ///   - timedOut: the value when the deadline passes first.
    ///   - cancelled: the value when the waiting task is cancelled first; `nil` ignores cancellation (for a
    ///     wait that must see its event, e.g. a close that was started by the cancellation itself).
    package static func wait(
        timeout: Duration?, timedOut: Value, cancelled: Value?,
        register: (DeadlineWaiter<Value>) -> Void
    ) async -> Value {
        let waiter = DeadlineWaiter<Value>()
        register(waiter)
        return await withTaskCancellationHandler {
            guard let timeout else { return await waiter.value() }
            return await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // A cancelled sleep (the wait ended, or the task was cancelled) must not time it out.
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    waiter.resolve(timedOut)
                }
                let value = await waiter.value()
                group.cancelAll()
                return value
            }
        } onCancel: {
            if let cancelled { waiter.resolve(cancelled) }
        }
    }
}
