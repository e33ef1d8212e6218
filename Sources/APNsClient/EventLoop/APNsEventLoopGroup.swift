import Glibc
import Logging
import ServiceSupport
import Synchronization

/// The event loops that serve APNs connections (`apns.ioThreads`): a small fixed set of threads, each an
/// epoll loop over many connections. Connections are spread over them in turn; a pool's timers run on one.
///
/// One group serves every client of a process (`shared`, unless the configuration names another), so the
/// process's thread count does not depend on its credentials, environments or connections.
package final class APNsEventLoopGroup: Sendable {
    let loops: [APNsEventLoop]
    private let nextIndex = Atomic<Int>(0)

    /// Loops for a machine with `cores` cores: 1 up to 4 cores (on 2 cores one loop costs less than two
    /// threads waking each other), then one per 4 cores — the rest is Kafka's and the pipeline's.
    package static func defaultLoopCount(cores: Int = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) -> Int {
        max(1, cores / 4)
    }

    /// The group clients use unless their configuration names another (`defaultLoopCount()` loops),
    /// started on first use.
    package static var shared: APNsEventLoopGroup {
        get throws(APNsClientError) { try shared(loops: 0) }
    }

    /// How long a busy loop gathers answers and requests before it turns again (`apns.batchWindowMs`), at least:
    /// a slow APNs that answers too few to fill a turn widens it (`BatchWindow`).
    package static let defaultBatchWindow: Duration = .milliseconds(2)

    private struct SharedKey: Hashable {
        var loops: Int
        var batchWindow: Duration
    }
    private static let sharedGroups = BlockingMutex<[SharedKey: APNsEventLoopGroup]>([:])

    /// The process's group of `loops` loops (0: `defaultLoopCount()`) with `batchWindow`, started on first
    /// use and kept for the process's life: every client configured alike shares it (`apns.ioThreads`).
    /// - Throws: `APNsClientError` when the kernel refuses a thread, an epoll set or an eventfd.
    package static func shared(loops: Int, batchWindow: Duration = defaultBatchWindow) throws(APNsClientError) -> APNsEventLoopGroup {
        let key = SharedKey(loops: loops > 0 ? loops : defaultLoopCount(), batchWindow: batchWindow)
        return try sharedGroups.withLock { (groups: inout [SharedKey: APNsEventLoopGroup]) throws(APNsClientError) -> APNsEventLoopGroup in
            if let group = groups[key] { return group }
            let group = try APNsEventLoopGroup(loops: key.loops, batchWindow: key.batchWindow)
            groups[key] = group
            return group
        }
    }

    /// Starts `loops` threads (at least one). A busy loop turns at most once per `batchWindow`, so that
    /// answers arriving one by one from a slow APNs are handled together (zero: a turn per event).
    /// - Throws: `APNsClientError` when the kernel refuses a thread, an epoll set or an eventfd.
    package init(loops: Int, batchWindow: Duration = defaultBatchWindow, logger: Logger = Logger(label: "apns.client")) throws(APNsClientError) {
        var started: [APNsEventLoop] = []
        for index in 0..<max(1, loops) {
            started.append(try APNsEventLoop(name: "apns-loop-\(index)", batchWindow: batchWindow, logger: logger))
        }
        self.loops = started
    }

    package var loopCount: Int { loops.count }

    /// The loop for the next connection (in turn).
    func next() -> APNsEventLoop {
        loops[nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Stops every loop's thread after its current turn. Connections still open are closed as lost; use it
    /// after the clients on it shut down (tests, tools). The shared group is never stopped.
    package func stop() {
        for loop in loops { loop.stop() }
    }
}
