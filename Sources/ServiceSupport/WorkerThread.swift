import Dispatch
import Synchronization

/// One named thread that runs blocking calls in turn, for calls that repeat: a Kafka transaction's
/// `send_offsets_to_transaction` and `commit_transaction`, several times a second. `DedicatedThread.run`
/// would create a thread (and its stack) for each.
///
/// The thread starts with the first call and ends after `idleTimeout` without one, so an owner that is
/// released without a stop leaves no thread behind for long; the next call starts a new one.
package final class WorkerThread: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var isRunning = false
        var threadsStarted = 0
    }

    private let name: String
    private let idleTimeout: Duration
    private let state = Mutex(State())
    /// One signal per job queued.
    private let queued = DispatchSemaphore(value: 0)

    package init(name: String, idleTimeout: Duration = .seconds(5)) {
        self.name = name
        self.idleTimeout = idleTimeout
    }

    /// Threads started so far (1 while calls keep coming more often than `idleTimeout`).
    package var threadsStarted: Int { state.withLock { $0.threadsStarted } }

    /// Runs `body` on the worker thread, after the calls before it, without blocking the caller's thread.
    /// When no thread can be started, `body` runs on the caller's (blocking it: better than not at all).
    package func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let start = state.withLock { state -> Bool in
                state.jobs.append { continuation.resume(returning: body()) }
                defer { state.isRunning = true }
                if !state.isRunning { state.threadsStarted += 1 }
                return !state.isRunning
            }
            queued.signal()
            guard start else { return }
            do {
                try DedicatedThread.start(name: name) { [self] in serve() }
            } catch {
                // No thread: this caller's thread serves what is queued, then the next call tries again.
                serve(once: true)
            }
        }
    }

    /// Runs queued calls until none came for `idleTimeout` (or, with `once`, until the queue is empty).
    private func serve(once: Bool = false) {
        enum Next {
            case run(@Sendable () -> Void)
            case wait
            case stop
        }
        while true {
            let timeout: DispatchTime = once ? .now() : .now() + .nanoseconds(Int(idleTimeout.nanoseconds))
            let signalled = queued.wait(timeout: timeout) == .success
            let next = state.withLock { state -> Next in
                // A job is queued before its signal, so a signal always finds one.
                if signalled { return .run(state.jobs.removeFirst()) }
                if state.jobs.isEmpty {
                    state.isRunning = false
                    return .stop
                }
                return .wait  // queued, its signal on the way
            }
            switch next {
            case .run(let job): job()
            case .wait: continue
            case .stop: return
            }
        }
    }
}
