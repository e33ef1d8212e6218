import Glibc
import Logging
import ServiceLifecycle
import ServiceSupport
import Synchronization

/// The event loops that serve APNs connections (`apns.ioThreads`): a small fixed set of threads, each an
/// epoll loop over many connections. Connections are spread over them in turn; a pool's timers run on one.
///
/// One group serves every client of a process (the application makes it and hands it to each client), so
/// the process's thread count does not depend on its credentials, environments or connections.
///
/// A service: `run()` starts the threads and stops them when it returns (at a graceful shutdown, or when
/// cancelled). Listed before the clients in a `ServiceGroup`, it stops after they shut down. A command or a
/// test runs it around its work with `withRunningLoops(_:)`. Work handed to a loop before its thread starts
/// waits for its first turn.
package final class APNsEventLoopGroup: Service, Sendable {
    let loops: [APNsEventLoop]
    private let nextIndex = Atomic<Int>(0)

    /// Loops for a process with `cores` CPUs: 1 up to 4 (on 2 cores one loop costs less than two threads
    /// waking each other), then one per 4 — the rest is Kafka's and the pipeline's. The CPUs are the
    /// container's (`CPUBudget`: its CPU limit and affinity), not the node's.
    package static func defaultLoopCount(cores: Int = CPUBudget.current.cores) -> Int {
        max(1, cores / 4)
    }

    /// How long a busy loop gathers answers and requests before it turns again (`apns.batchWindowMs`), at least:
    /// a slow APNs that answers too few to fill a turn widens it (`BatchWindow`).
    package static let defaultBatchWindow: Duration = .milliseconds(2)

    /// Sets up `loops` loops (at least one; 0: `defaultLoopCount()`); their threads start in `run()`. A busy
    /// loop turns at most once per `batchWindow`, so that answers arriving one by one from a slow APNs are
    /// handled together (zero: a turn per event).
    /// - Throws: `APNsClientError` when the kernel refuses an epoll set, an eventfd or a timerfd.
    package init(loops: Int = 0, batchWindow: Duration = defaultBatchWindow, logger: Logger = Logger(label: "apns.client")) throws(APNsClientError) {
        var made: [APNsEventLoop] = []
        for index in 0..<max(1, loops > 0 ? loops : Self.defaultLoopCount()) {
            made.append(try APNsEventLoop(name: "apns-loop-\(index)", batchWindow: batchWindow, logger: logger))
        }
        self.loops = made
    }

    package var loopCount: Int { loops.count }

    /// The loop for the next connection (in turn).
    func next() -> APNsEventLoop {
        loops[nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Starts every loop's thread, waits for a graceful shutdown (or cancellation), then stops the loops and
    /// returns once their threads have ended. Connections still open then are closed as lost: shut the
    /// clients down first (a `ServiceGroup` does, when the clients come after the group).
    /// - Throws: `APNsClientError` when the kernel refuses a thread.
    package func run() async throws {
        try await withRunningLoops { try? await gracefulShutdown() }
    }

    /// Runs `body` with the loops' threads running, then stops them (see `run()`).
    package func withRunningLoops<T>(_ body: () async throws -> T) async throws -> T {
        do {
            try startThreads()
        } catch {
            await stop()
            throw error
        }
        let result: T
        do {
            result = try await body()
        } catch {
            await stop()
            throw error
        }
        await stop()
        return result
    }

    /// Starts every loop's thread now, on the calling thread (a loop already started is left as it is).
    /// `run()` and `withRunningLoops(_:)` do; tests that keep a group for the whole process call it at once,
    /// because a task that would run it may start late on a busy cooperative pool, and a connection handed
    /// to a loop that has not started waits for its SETTINGS until its connect deadline.
    func startThreads() throws(APNsClientError) {
        for loop in loops { try loop.start() }
    }

    /// Ends every loop's thread after its current turn and waits for them.
    private func stop() async {
        for loop in loops { loop.stop() }
        for loop in loops { await loop.waitUntilEnded() }
    }
}
