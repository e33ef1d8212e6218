import APNsCore
import NIOCore
import ServiceSupport
import Synchronization

/// One notification the mock accepted (answered 200), as the client sent it.
package struct AcceptedNotification: Sendable, Hashable {
    /// Lower-case hex device token from `:path`.
    package var deviceToken: String
    package var topic: String
    package var pushType: PushType
    /// The `apns-id` answered (echoed, or generated when the request had none).
    package var apnsID: String
    /// `apns-priority` as sent; `nil` when absent (APNs uses 10).
    package var priority: Int?
    /// `apns-expiration` in UNIX seconds; `nil` when absent.
    package var expiration: Int64?
    package var collapseID: String?
    /// The request body, byte for byte.
    package var payload: [UInt8]
    /// Which connection carried it (see `MockStatistics.requestsByConnection`).
    package var connectionID: Int
    /// Server clock when it was accepted.
    package var receivedAtMilliseconds: Int64
}

/// One broadcast send the mock accepted (answered 200), as the client sent it.
package struct AcceptedBroadcast: Sendable, Hashable {
    /// `apns-channel-id` as sent.
    package var channelID: String
    /// The bundle id from `:path`.
    package var bundleID: String
    /// The `apns-request-id` answered (echoed, or generated when the request had none).
    package var requestID: String
    /// The `apns-unique-id` answered.
    package var uniqueID: String
    /// `apns-priority` as sent; `nil` when absent (APNs uses 10).
    package var priority: Int?
    /// `apns-expiration` in UNIX seconds; `nil` when absent.
    package var expiration: Int64?
    /// The request body, byte for byte.
    package var payload: [UInt8]
    /// Which connection carried it (see `MockStatistics.requestsByConnection`).
    package var connectionID: Int
    /// Server clock when it was accepted.
    package var receivedAtMilliseconds: Int64
}

/// Counters of everything the mock answered. A snapshot; take a new one to see later traffic.
///
/// Guarantee: an answer a client has received is already counted here (outcomes are committed before any
/// byte of their answers is flushed), so a test may compare what its client saw with these counters exactly,
/// right after the last answer.
package struct MockStatistics: Sendable, Hashable {
    /// Requests whose last frame arrived (including refused, withheld and dropped ones), on every listener:
    /// device pushes, broadcast sends and channel management.
    package var requests = 0
    /// Of `requests`, broadcast sends (`/4/broadcasts/` on the push port).
    package var broadcastRequests = 0
    /// Of `requests`, requests on the channel-management port (any path).
    package var managementRequests = 0
    /// Device notifications answered 200 (the count of `acceptedNotifications`, before its history limit).
    package var accepted = 0
    /// Broadcast sends answered 200 (the count of `acceptedBroadcasts`, before its history limit).
    package var acceptedBroadcasts = 0
    /// Answers by `"<status>"` for successes (200, and 201 and 204 from channel management) and
    /// `"<status> <Reason>"` otherwise, e.g. `"400 BadTopic"`; over every listener.
    package var responses: [String: Int] = [:]
    /// Requests per connection id.
    package var requestsByConnection: [Int: Int] = [:]
    /// Requests and accepted notifications per device token (lower-case hex).
    package var deviceTokens: [String: DeviceTokenCounts] = [:]
    /// Requests per device token (lower-case hex).
    package var requestsByDeviceToken: [String: Int] { deviceTokens.mapValues(\.requests) }
    /// Accepted notifications per device token (tokens with at least one).
    package var acceptedByDeviceToken: [String: Int] {
        deviceTokens.compactMapValues { $0.accepted > 0 ? $0.accepted : nil }
    }
    /// Streams reset with REFUSED_STREAM by fault injection.
    package var refusedStreams = 0
    /// Requests never answered (withheld by fault injection).
    package var withheldReplies = 0
    /// Connections closed abruptly by fault injection (`dropConnectionOnNext`, `closeAllConnections`).
    package var droppedConnections = 0
    /// GOAWAY frames sent.
    package var goAwaysSent = 0
    /// Connections accepted so far.
    package var connectionsOpened = 0
    /// Highest number of requests open at once on one connection, per connection id.
    package var peakConcurrentStreamsByConnection: [Int: Int] = [:]
    /// Per connection id, every MAX_CONCURRENT_STREAMS its client acknowledged, in order, and how the client
    /// kept to each: a lifetime peak cannot tell whether a lowered limit was kept, these can.
    package var acknowledgedStreamLimitsByConnection: [Int: [AcknowledgedStreamLimit]] = [:]

    /// Answers counted for a reason (any status).
    package func count(_ reason: APNsReason) -> Int {
        guard let status = reason.status else { return 0 }
        return responses["\(status) \(reason.rawValue)"] ?? 0
    }
}

/// One MAX_CONCURRENT_STREAMS a connection's client acknowledged (SETTINGS ACK) and what it did under it. The
/// limit binds from the acknowledgement on (RFC 9113 §6.5.3): streams the client opened before it may
/// still be open, and count, since a client must not open a new stream beside them either.
package struct AcknowledgedStreamLimit: Sendable, Hashable {
    /// The limit in force.
    package var limit: Int
    /// Streams the client opened under it.
    package var opened = 0
    /// The most streams open at once when one of those was opened.
    package var peak = 0
    /// Streams the client opened beyond it, which NIOHTTP2Handler refused (REFUSED_STREAM) before the mock
    /// saw them.
    package var refused = 0

    package init(limit: Int) { self.limit = limit }

    /// Whether the client kept to the limit under it.
    package var kept: Bool { peak <= limit && refused == 0 }
}

/// What the mock answered for one device token.
package struct DeviceTokenCounts: Sendable, Hashable {
    /// Requests for the token (any outcome that reached validation).
    package var requests = 0
    /// Of those, answered 200.
    package var accepted = 0
    /// When the latest of those requests was counted (UNIX milliseconds, wall clock; read once per batch).
    package var lastRequestMilliseconds: Int64 = 0

    package init(requests: Int = 0, accepted: Int = 0, lastRequestMilliseconds: Int64 = 0) {
        self.requests = requests
        self.accepted = accepted
        self.lastRequestMilliseconds = lastRequestMilliseconds
    }
}

/// Waiting for traffic and the bounded history of accepted notifications.
final class ObservationStore: Sendable {
    private struct State {
        var statistics = MockStatistics()
        var ring: AcceptedRing
        /// Accepted broadcasts, oldest first; trimmed to `historyLimit` when twice as long (broadcasts are few,
        /// so a plain array suffices).
        var broadcasts: [AcceptedBroadcast] = []
        var waiters: [Waiter] = []
    }

    struct Waiter {
        var condition: @Sendable (MockStatistics) -> Bool
        var waiter: DeadlineWaiter<WaitOutcome>
    }

    enum WaitOutcome: Sendable {
        case satisfied
        case timedOut
        case cancelled
    }

    private let state: Mutex<State>
    let historyLimit: Int

    init(historyLimit: Int) {
        self.historyLimit = max(1, historyLimit)
        state = Mutex(State(ring: AcceptedRing(limit: historyLimit)))
    }

    enum Outcome {
        /// A device push answered 200.
        case accepted(AcceptedRequest)
        case acceptedBroadcast(AcceptedBroadcast)
        /// A channel-management success (200, 201 or 204).
        case succeeded(status: Int)
        case rejected(status: Int, reason: APNsReason)
        case refused
        case withheld
        case dropped
    }

    /// One request's outcome, collected by a connection and recorded with the rest of its read batch.
    struct Record {
        var outcome: Outcome
        var deviceToken: String?
        var kind: RequestKind
    }

    /// The outcomes of one read batch of one connection, and the accepted payloads' bytes. Reused from batch
    /// to batch (capacity kept), so recording allocates nothing per request.
    struct Batch {
        private(set) var records: [Record] = []
        private(set) var payloads: [UInt8] = []

        var isEmpty: Bool { records.isEmpty }

        mutating func append(_ outcome: Outcome, deviceToken: String? = nil, kind: RequestKind) {
            records.append(Record(outcome: outcome, deviceToken: deviceToken, kind: kind))
        }

        /// Copies `payload`'s readable bytes; returns their range for `AcceptedRequest.payload`.
        mutating func storePayload(_ payload: ByteBuffer?) -> Range<Int> {
            let start = payloads.count
            payload?.withUnsafeReadableBytes { payloads.append(contentsOf: $0) }
            return start..<payloads.count
        }

        mutating func removeAll() {
            records.removeAll(keepingCapacity: true)
            payloads.removeAll(keepingCapacity: true)
        }
    }

    /// Records a batch of requests under one lock acquisition. Resumes waiters whose condition now holds
    /// (outside the lock).
    func record(_ batch: Batch, connectionID: Int) {
        let records = batch.records
        guard !records.isEmpty else { return }
        let historyLimit = self.historyLimit
        let now = WallClock.system.nowMilliseconds()
        batch.payloads.withUnsafeBytes { payloads in state.withLock { state in
            state.statistics.requests += records.count
            state.statistics.requestsByConnection[connectionID, default: 0] += records.count
            // 200 answers, added to `responses` once per batch (one hash instead of one per request).
            var ok = 0
            for record in records {
                switch record.kind {
                case .device: break
                case .broadcast: state.statistics.broadcastRequests += 1
                case .management: state.statistics.managementRequests += 1
                }
                if let deviceToken = record.deviceToken {
                    // One hash of the token per request: both counts are updated in place.
                    state.statistics.deviceTokens[deviceToken, default: DeviceTokenCounts()].count(record.outcome, at: now)
                }
                switch record.outcome {
                case .accepted(let request):
                    state.statistics.accepted += 1
                    ok += 1
                    state.ring.append(request, payloads: payloads)
                case .acceptedBroadcast(let broadcast):
                    state.statistics.acceptedBroadcasts += 1
                    ok += 1
                    state.broadcasts.append(broadcast)
                    if state.broadcasts.count >= 2 * historyLimit {
                        state.broadcasts.removeFirst(state.broadcasts.count - historyLimit)
                    }
                case .succeeded(let status):
                    if status == 200 { ok += 1 } else { state.statistics.responses["\(status)", default: 0] += 1 }
                case .rejected(let status, let reason):
                    state.statistics.responses["\(status) \(reason.rawValue)", default: 0] += 1
                case .refused:
                    state.statistics.refusedStreams += 1
                case .withheld:
                    state.statistics.withheldReplies += 1
                case .dropped:
                    state.statistics.droppedConnections += 1
                }
            }
            if ok > 0 { state.statistics.responses["200", default: 0] += ok }
            Self.resolveReady(&state)
        } }
    }

    /// Updates counters that are not requests (connections, GOAWAYs, peaks).
    func update(_ body: (inout MockStatistics) -> Void) {
        state.withLock { state in
            body(&state.statistics)
            Self.resolveReady(&state)
        }
    }

    /// Resolving a waiter only enqueues its task, so it is done under the lock.
    private static func resolveReady(_ state: inout State) {
        guard !state.waiters.isEmpty else { return }
        let statistics = state.statistics
        state.waiters.removeAll { entry in
            if entry.waiter.isResolved { return true }  // timed out or cancelled
            guard entry.condition(statistics) else { return false }
            entry.waiter.resolve(.satisfied)
            return true
        }
    }

    var statistics: MockStatistics { state.withLock { $0.statistics } }

    var accepted: [AcceptedNotification] {
        state.withLock { state in
            state.ring.notifications
        }
    }

    /// Accepted broadcasts, oldest first (at most `historyLimit`).
    var acceptedBroadcasts: [AcceptedBroadcast] {
        state.withLock { Array($0.broadcasts.suffix(historyLimit)) }
    }

    func reset() {
        state.withLock { state in
            state.statistics = MockStatistics()
            state.ring.removeAll()
            state.broadcasts.removeAll()
        }
    }

    /// Suspends until `condition` holds for the statistics, or throws `APNsMockTimeout` after `timeout`.
    func wait(
        for description: String,
        timeout: Duration,
        condition: @escaping @Sendable (MockStatistics) -> Bool
    ) async throws {
        let outcome = await DeadlineWaiter.wait(timeout: timeout, timedOut: WaitOutcome.timedOut, cancelled: .cancelled) { waiter in
            state.withLock { state in
                if condition(state.statistics) {
                    waiter.resolve(.satisfied)
                } else {
                    state.waiters.append(Waiter(condition: condition, waiter: waiter))
                }
            }
        }
        switch outcome {
        case .satisfied:
            return
        case .cancelled:
            throw CancellationError()
        case .timedOut:
            let statistics = self.statistics
            throw APNsMockTimeout(
                message: "timed out after \(timeout) waiting for \(description); "
                    + "saw \(statistics.requests) requests, \(statistics.accepted) accepted, "
                    + "\(statistics.acceptedBroadcasts) broadcasts accepted, "
                    + "responses \(statistics.responses.sorted { $0.key < $1.key })"
            )
        }
    }
}

/// A wait on the mock did not see what it waited for before its deadline.
package struct APNsMockTimeout: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
    package init(message: String) { self.message = message }
}

extension DeviceTokenCounts {
    fileprivate mutating func count(_ outcome: ObservationStore.Outcome, at milliseconds: Int64) {
        requests += 1
        lastRequestMilliseconds = milliseconds
        if case .accepted = outcome { accepted += 1 }
    }
}
