import Dispatch
import Logging
import ServiceSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGTERM and SIGINT for `apns-relay run`: the first starts a graceful shutdown, a second ends the process at
/// once.
///
/// Installed before anything slow starts (the admin port, the credentials, the Kafka clients), so a signal
/// that arrives during start-up is neither lost nor fatal: it is remembered and shuts the service group down
/// gracefully as soon as the group runs (`ServiceGroup.triggerGracefulShutdown` keeps a request made before
/// `run()`). The group gets no signals of its own: two observers of one signal could each see it "first".
///
/// swift-service-lifecycle offers no escalation (its cancellation still waits for every service), so the second
/// signal calls `_exit`: nothing can hold it up. Offsets of unfinished events are not committed; the next owner
/// of their partitions processes them again (at least once holds).
/// Keep it alive as long as signals should be handled (its dispatch sources stop with it).
final class ShutdownSignals {
    /// The first signal's number, once one arrived.
    let first = Latch<Int32>()
    private let sources: [any DispatchSourceSignal]

    init(logger: Logger) {
        let queue = DispatchQueue(label: "apns-relay.signals")
        let signals: [(number: Int32, name: String)] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")]
        let first = self.first
        let received = Mutex(0)
        sources = signals.map { watched in
            // The default actions would kill the process from whichever thread receives the signal; the
            // dispatch sources observe the signals instead.
            signal(watched.number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: watched.number, queue: queue)
            source.setEventHandler {
                // `data` counts the deliveries coalesced into this call: two quick signals are still two.
                let count = received.withLock { count in
                    count += Int(source.data)
                    return count
                }
                if count == 1 {
                    logger.notice("\(watched.name) received: shutting down gracefully; a second SIGTERM or SIGINT exits at once")
                    first.set(watched.number)
                    return
                }
                let status = 128 + watched.number
                logger.critical("\(watched.name) received while shutting down: exiting at once with status \(status), unfinished events are not committed")
                fflush(nil)
                _exit(status)
            }
            source.resume()
            return source
        }
    }

    deinit {
        sources.forEach { $0.cancel() }
    }
}
