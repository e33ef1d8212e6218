import Synchronization

/// Waits until `condition` holds, checking it every `interval`, or throws at the deadline.
///
/// For states that announce nothing (another process's admin endpoint, a TCP listener, a gauge): whatever
/// does announce itself is awaited with `EventRecorder` or `TestSignal` instead. A condition that throws
/// counts as not yet.
package func eventually(
    _ what: String, within timeout: Duration, every interval: Duration = .milliseconds(50),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return }
        try await Task.sleep(for: interval)  // between probes of something that cannot notify us
    }
    throw TestFailure("\(what) did not happen within \(timeout)")
}

/// Runs `operation`, or throws `TestFailure` naming `what` when it has not finished within `timeout`.
package func withDeadline<T: Sendable>(
    _ what: String, timeout: Duration = .seconds(5), _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("\(what) did not happen within \(timeout)")
        }
        return value
    }
}

/// An ordered log shared by tasks and callbacks, with "wait until this holds" and a deadline.
package final class EventRecorder<Entry: Sendable>: Sendable {
    private struct Waiter {
        var predicate: @Sendable ([Entry]) -> Bool
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var entries: [Entry] = []
        var waiters: [Int: Waiter] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())

    package init() {}

    package var entries: [Entry] { state.withLock { $0.entries } }

    package func append(_ entry: Entry) {
        let ready = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.entries.append(entry)
            let entries = state.entries
            let matched = state.waiters.filter { $0.value.predicate(entries) }
            for id in matched.keys { state.waiters[id] = nil }
            return matched.values.map(\.continuation)
        }
        ready.forEach { $0.resume(returning: true) }
    }

    /// Waits until `predicate` holds for the log; throws `TestFailure` naming `what` after `timeout`.
    package func waitUntil(
        _ what: String, within timeout: Duration, _ predicate: @escaping @Sendable ([Entry]) -> Bool
    ) async throws {
        let satisfied = await withCheckedContinuation { continuation in
            let id = state.withLock { state -> Int? in
                if predicate(state.entries) { return nil }
                state.nextID += 1
                state.waiters[state.nextID] = Waiter(predicate: predicate, continuation: continuation)
                return state.nextID
            }
            guard let id else { return continuation.resume(returning: true) }
            Task {
                try? await Task.sleep(for: timeout)
                state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: false)
            }
        }
        if !satisfied { throw TestFailure("\(what) did not happen within \(timeout)") }
    }
}

/// A one-shot flag a callback raises and a test awaits with a deadline.
package final class TestSignal: Sendable {
    private let recorder = EventRecorder<Bool>()
    package init() {}
    package func raise() { recorder.append(true) }
    /// - Returns: whether it was raised within `timeout`.
    package func wait(within timeout: Duration) async -> Bool {
        (try? await recorder.waitUntil("signal", within: timeout) { !$0.isEmpty }) != nil
    }
    package var isRaised: Bool { !recorder.entries.isEmpty }
}
