import Synchronization

/// A one-shot "it happened" that any number of tasks can await with a deadline.
final class CompletionSignal: Sendable {
    private struct State {
        var isComplete = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var timers: [Int: Task<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    var isComplete: Bool { state.withLock { $0.isComplete } }

    func complete() {
        let (waiters, timers) = state.withLock { state -> ([CheckedContinuation<Bool, Never>], [Task<Void, Never>]) in
            guard !state.isComplete else { return ([], []) }
            state.isComplete = true
            defer { state.waiters = [:]; state.timers = [:] }
            return (Array(state.waiters.values), Array(state.timers.values))
        }
        timers.forEach { $0.cancel() }
        waiters.forEach { $0.resume(returning: true) }
    }

    /// Waits with no deadline, for callers that are themselves bounded (e.g. a service's run()).
    func wait() async {
        let _: Bool = await withCheckedContinuation { continuation in
            let registered = state.withLock { state -> Bool in
                if state.isComplete { return false }
                state.nextID += 1
                state.waiters[state.nextID] = continuation
                return true
            }
            if !registered { continuation.resume(returning: true) }
        }
    }

    /// - Returns: true if completed within `timeout`, false if the deadline passed first.
    func wait(timeout: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let id = state.withLock { state -> Int? in
                if state.isComplete { return nil }
                state.nextID += 1
                state.waiters[state.nextID] = continuation
                return state.nextID
            }
            guard let id else { return continuation.resume(returning: true) }
            let timer = Task { [self] in
                try? await Task.sleep(for: timeout)
                if Task.isCancelled { return }
                let expired = state.withLock { state in
                    state.timers[id] = nil
                    return state.waiters.removeValue(forKey: id)
                }
                expired?.resume(returning: false)
            }
            state.withLock { state in
                if state.waiters[id] != nil { state.timers[id] = timer } else { timer.cancel() }
            }
        }
    }
}
