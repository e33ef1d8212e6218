import APNsCore
import Synchronization

/// Faults the mock injects, programmable while it runs. All members are thread-safe.
///
/// They apply alike to every request on both listeners — device pushes, broadcast sends and channel
/// management — since one connection handler serves them all; an injected error names the request by the
/// header its API uses (`apns-id` or `apns-request-id`).
///
/// Per-request faults are applied in this order when a request's last frame arrives: refuse (RST_STREAM
/// REFUSED_STREAM, not processed) → drop the connection (abrupt TCP close, no reply) → withhold the reply
/// (not processed, no reply ever) → injected error (`failNext`, then `failureRates`) → normal validation.
package final class FaultInjector: Sendable {
    /// Emulated network round trip: replies and connection WINDOW_UPDATEs leave `rtt` (± `jitter`) after the
    /// request batch that caused them arrived, so a connection carries at most one flow-control window per RTT.
    package struct Latency: Sendable, Hashable {
        package var rtt: Duration
        package var jitter: Duration
        /// A server that answers at most this many requests per second, in arrival order over all its
        /// connections (a slow or degraded APNs): what arrives faster waits there, and its answer comes
        /// when its turn has passed, plus `rtt`. `nil`: no limit.
        package var answersPerSecond: Int?
        package init(rtt: Duration, jitter: Duration = .zero, answersPerSecond: Int? = nil) {
            self.rtt = rtt
            self.jitter = jitter
            self.answersPerSecond = answersPerSecond
        }
    }

    struct Plan {
        var latency: Latency?
        var failNext: [(count: Int, reason: APNsReason)] = []
        var failureRates: [(rate: Double, reason: APNsReason)] = []
        var refuseNext = 0
        var dropNext = 0
        var withholdNext = 0
        var withholdAll = false
        var withholdRate = 0.0
        var goAwayAfterStreams: Int?
        var stallFlowControl = false
        var dropStreamLimitAfterRejection = false
        var random = Xorshift(seed: 0x9E37_79B9_7F4A_7C15)
    }

    enum RequestFault {
        case none
        case refuse
        case drop
        case withhold
        case fail(APNsReason)
    }

    private let plan = Mutex(Plan())
    /// Set when anything per-request is armed, so the common path takes no lock.
    private let armed = Atomic<Bool>(false)
    /// Called when flow control resumes so stalled connections send their WINDOW_UPDATEs.
    let onFlowControlResumed = Mutex<(@Sendable () -> Void)?>(nil)

    init() {}

    /// Emulated RTT; `nil` answers at once.
    package var latency: Latency? {
        get { plan.withLock { $0.latency } }
        set { plan.withLock { $0.latency = newValue } }
    }

    /// Answers the next `count` requests (on any connection) with `reason` and its status, unprocessed.
    package func failNext(_ count: Int, with reason: APNsReason) {
        update { $0.failNext.append((count, reason)) }
    }

    /// Answers a random `rate` (0…1) of requests with `reason`; a rate of 0 removes the entry.
    package func setFailureRate(_ rate: Double, for reason: APNsReason) {
        update { plan in
            plan.failureRates.removeAll { $0.reason == reason }
            if rate > 0 { plan.failureRates.append((rate, reason)) }
        }
    }

    /// Resets the next `count` streams with RST_STREAM REFUSED_STREAM (not processed).
    package func refuseNext(_ count: Int) { update { $0.refuseNext += count } }

    /// Closes the TCP connection abruptly (no GOAWAY, no reply) when each of the next `count` requests arrives.
    package func dropConnectionOnNext(_ count: Int) { update { $0.dropNext += count } }

    /// Never answers the next `count` requests (they are not processed), to exercise client deadlines.
    package func withholdNext(_ count: Int) { update { $0.withholdNext += count } }

    /// Never answers a random `rate` (0…1) of requests (they are not processed): replies lost here and
    /// there, as opposed to `withholdNext`'s run of them (a black hole, which a client that sends little into
    /// it takes long to use up).
    package var withholdRate: Double {
        get { plan.withLock { $0.withholdRate } }
        set { update { $0.withholdRate = max(0, min(1, newValue)) } }
    }

    /// Never answers any request while set.
    package var withholdAllReplies: Bool {
        get { plan.withLock { $0.withholdAll } }
        set { update { $0.withholdAll = newValue } }
    }

    /// Each connection sends GOAWAY (NO_ERROR, `{"reason":"Shutdown"}`) after processing this many streams;
    /// streams above its last-stream-id are not processed.
    package var goAwayAfterStreams: Int? {
        get { plan.withLock { $0.goAwayAfterStreams } }
        set { update { $0.goAwayAfterStreams = newValue } }
    }

    /// Slow reader: while set, the mock sends no WINDOW_UPDATEs, so clients stall once the window is used.
    package var stallFlowControl: Bool {
        get { plan.withLock { $0.stallFlowControl } }
        set {
            plan.withLock { $0.stallFlowControl = newValue }
            if !newValue, let resume = onFlowControlResumed.withLock({ $0 }) { resume() }
        }
    }

    /// APNs behaviour seen in the wild: after a rejected notification a token connection's
    /// MAX_CONCURRENT_STREAMS drops to 1, and returns to the configured value after the next accepted one
    /// sent under the lowered limit (a stream the client opened after it acknowledged the drop).
    package var dropStreamLimitAfterRejection: Bool {
        get { plan.withLock { $0.dropStreamLimitAfterRejection } }
        set { plan.withLock { $0.dropStreamLimitAfterRejection = newValue } }
    }

    /// Clears every fault.
    package func reset() {
        plan.withLock { $0 = Plan() }
        armed.store(false, ordering: .relaxed)
        if let resume = onFlowControlResumed.withLock({ $0 }) { resume() }
    }

    private func update(_ body: (inout Plan) -> Void) {
        plan.withLock { plan in
            body(&plan)
            armed.store(plan.isArmed, ordering: .relaxed)
        }
    }

    /// The fault for one request; consumes "next N" budgets.
    func nextRequestFault() -> RequestFault {
        guard armed.load(ordering: .relaxed) else { return .none }
        return plan.withLock { plan in
            defer { armed.store(plan.isArmed, ordering: .relaxed) }
            if plan.refuseNext > 0 {
                plan.refuseNext -= 1
                return .refuse
            }
            if plan.dropNext > 0 {
                plan.dropNext -= 1
                return .drop
            }
            if plan.withholdNext > 0 {
                plan.withholdNext -= 1
                return .withhold
            }
            if plan.withholdAll { return .withhold }
            if plan.withholdRate > 0, plan.random.nextUnit() < plan.withholdRate { return .withhold }
            if !plan.failNext.isEmpty {
                let reason = plan.failNext[0].reason
                plan.failNext[0].count -= 1
                if plan.failNext[0].count <= 0 { plan.failNext.removeFirst() }
                return .fail(reason)
            }
            for entry in plan.failureRates where plan.random.nextUnit() < entry.rate {
                return .fail(entry.reason)
            }
            return .none
        }
    }

    /// Per-batch settings read once per read batch.
    func batchSettings() -> (latency: Latency?, stall: Bool, goAwayAfter: Int?, dropLimitAfterRejection: Bool) {
        plan.withLock { ($0.latency, $0.stallFlowControl, $0.goAwayAfterStreams, $0.dropStreamLimitAfterRejection) }
    }
}

extension FaultInjector.Plan {
    var isArmed: Bool {
        refuseNext > 0 || dropNext > 0 || withholdNext > 0 || withholdAll || withholdRate > 0 || !failNext.isEmpty
            || !failureRates.isEmpty
    }
}

/// Small fast PRNG for fault rates and jitter (not for anything secret).
struct Xorshift {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x2545_F491_4F6C_DD1D : seed }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
    /// Uniform in [0, 1).
    mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1.0p-53 }
}
