import APNsCore

/// Bounds the events (and bytes) in flight, per lane, with hysteresis: a bound reached holds intake, which
/// resumes only once the counts that reached it are back below their low-water marks, so intake does not
/// flap.
///
/// Two bounds:
/// - **all events**: `maxEvents` / `maxBytes`. Reached, both lanes are held.
/// - **bulk events**: the same bounds less `urgentShare`. Reached, bulk is held and urgent goes on: the
///   share is urgent's alone, and urgent may also use whatever bulk leaves free. With no urgent topics the
///   relay sets the share to 0, and bulk has everything.
///
/// A value type: the relay keeps it behind its lock and acts on the returned changes under it.
package struct InFlightGate: Sendable, Hashable {
    package struct Limits: Sendable, Hashable {
        package var maxEvents: Int
        package var maxBytes: Int
        /// Fraction of each bound below which a held lane resumes.
        package var resumeFraction: Double
        /// The fraction of both bounds that bulk events may not use (`relay.lanes.urgentShare`).
        package var urgentShare: Double

        package init(maxEvents: Int = 5_000, maxBytes: Int = 64 << 20, resumeFraction: Double = 0.5, urgentShare: Double = 0.2) {
            self.maxEvents = maxEvents
            self.maxBytes = maxBytes
            self.resumeFraction = resumeFraction
            self.urgentShare = urgentShare
        }

        /// The largest `urgentShare` accepted: bulk keeps at least a tenth.
        package static let maxUrgentShare = 0.9
    }

    /// Which lanes a call held (`true`) or resumed (`false`); `nil`: unchanged.
    package struct Changes: Sendable, Hashable {
        package var urgent: Bool?
        package var bulk: Bool?

        package var isEmpty: Bool { urgent == nil && bulk == nil }

        package subscript(lane: DeliveryLane) -> Bool? {
            lane == .urgent ? urgent : bulk
        }
    }

    private struct Count: Sendable, Hashable {
        var events = 0
        var bytes = 0
    }

    package let limits: Limits
    private var all = Count()
    private var bulk = Count()
    private let bulkMaxEvents: Int
    private let bulkMaxBytes: Int
    /// The all-events bound was reached and its counts have not come down to low water yet.
    private var allFull = false
    /// The same for the bulk bound.
    private var bulkFull = false
    /// The most events seen in flight at once, per lane (diagnostic: bulk's never passes `bulkEventLimit`).
    package private(set) var peakUrgentEvents = 0
    package private(set) var peakBulkEvents = 0

    package init(limits: Limits) {
        self.limits = limits
        let bulkFraction = 1 - min(max(0, limits.urgentShare), Limits.maxUrgentShare)
        bulkMaxEvents = max(1, Int((Double(limits.maxEvents) * bulkFraction).rounded(.down)))
        bulkMaxBytes = max(1, Int((Double(limits.maxBytes) * bulkFraction).rounded(.down)))
    }

    package var events: Int { all.events }
    package var bytes: Int { all.bytes }
    /// Events in flight in `lane`.
    package func events(in lane: DeliveryLane) -> Int { lane == .bulk ? bulk.events : all.events - bulk.events }
    /// Whether `lane`'s intake is held.
    package func isHeld(_ lane: DeliveryLane) -> Bool { lane == .urgent ? allFull : allFull || bulkFull }
    /// Whether any intake is held.
    package var isPaused: Bool { allFull || bulkFull }
    /// The most bulk events in flight (the events bound less the urgent share).
    package var bulkEventLimit: Int { bulkMaxEvents }

    /// Counts an event of `size` bytes in.
    package mutating func admit(bytes size: Int, lane: DeliveryLane = .bulk) -> Changes {
        let before = holds
        all.events += 1
        all.bytes += size
        if lane == .bulk {
            bulk.events += 1
            bulk.bytes += size
        }
        if lane == .bulk {
            peakBulkEvents = max(peakBulkEvents, bulk.events)
        } else {
            peakUrgentEvents = max(peakUrgentEvents, all.events - bulk.events)
        }
        if !allFull, all.events >= limits.maxEvents || all.bytes >= limits.maxBytes { allFull = true }
        if !bulkFull, bulk.events >= bulkMaxEvents || bulk.bytes >= bulkMaxBytes { bulkFull = true }
        return changes(from: before)
    }

    /// Counts an event of `size` bytes out.
    package mutating func release(bytes size: Int, lane: DeliveryLane = .bulk) -> Changes {
        let before = holds
        all.events -= 1
        all.bytes -= size
        if lane == .bulk {
            bulk.events -= 1
            bulk.bytes -= size
        }
        let low = limits.resumeFraction
        if allFull, Double(all.events) <= Double(limits.maxEvents) * low, Double(all.bytes) <= Double(limits.maxBytes) * low {
            allFull = false
        }
        if bulkFull, Double(bulk.events) <= Double(bulkMaxEvents) * low, Double(bulk.bytes) <= Double(bulkMaxBytes) * low {
            bulkFull = false
        }
        return changes(from: before)
    }

    private var holds: (urgent: Bool, bulk: Bool) { (isHeld(.urgent), isHeld(.bulk)) }

    private func changes(from before: (urgent: Bool, bulk: Bool)) -> Changes {
        let after = holds
        return Changes(urgent: after.urgent == before.urgent ? nil : after.urgent, bulk: after.bulk == before.bulk ? nil : after.bulk)
    }
}
