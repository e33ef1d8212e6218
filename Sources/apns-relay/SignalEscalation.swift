import Dispatch
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ends the process at once on a second SIGTERM or SIGINT, while the first one's graceful shutdown runs.
///
/// swift-service-lifecycle's `ServiceGroup` turns the first signal into a graceful shutdown and offers no
/// escalation: its cancellation signals must differ from the graceful ones, and cancellation still waits
/// for every service to return. An operator who presses Ctrl-C twice, or an orchestrator that sends SIGTERM
/// again, wants the process gone now, so this observes the same signals itself and calls `_exit` on the
/// second: no service can hold it up. Offsets of unfinished events are not committed; the next owner of
/// their partitions processes them again (at least once holds).
struct SignalEscalation: Sendable {
    let logger: Logger

    /// Watches SIGTERM and SIGINT until the calling task is cancelled.
    func run() async {
        let queue = DispatchQueue(label: "apns-relay.signal-escalation")
        let signals: [(number: Int32, name: String)] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")]
        let sources = signals.map { watched in
            // The default actions would kill the process from whichever thread receives the signal; the
            // dispatch sources (ours and the ServiceGroup's) observe the signals instead.
            signal(watched.number, SIG_IGN)
            return DispatchSource.makeSignalSource(signal: watched.number, queue: queue)
        }
        let logger = self.logger
        var received = 0  // only touched on `queue`
        for (watched, source) in zip(signals, sources) {
            source.setEventHandler {
                // `data` counts the deliveries coalesced into this call: two quick signals are still two.
                received += Int(source.data)
                if received == 1 {
                    logger.notice("\(watched.name) received: shutting down gracefully; a second SIGTERM or SIGINT exits at once")
                    return
                }
                let status = 128 + watched.number
                logger.critical("\(watched.name) received while shutting down: exiting at once with status \(status), unfinished events are not committed")
                fflush(nil)
                _exit(status)
            }
            source.resume()
        }
        let (cancelled, continuation) = AsyncStream<Never>.makeStream()
        await withTaskCancellationHandler {
            for await _ in cancelled {}
        } onCancel: {
            continuation.finish()
        }
        sources.forEach { $0.cancel() }
    }
}
