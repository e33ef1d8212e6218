import APNsCore

// The capacity rules the state machine decides by: read-only, so they can be read apart from its decisions.
extension PoolStateMachine {
    /// The least-loaded usable connection with a free stream, within the adaptive limit, and the stream
    /// capacity of all usable connections (for bulk's cap); `nil` when none can take a request. A connection
    /// that has been given its last stream id gets no more requests (so none is queued where no stream can
    /// open for it); it retires once its last request finished.
    @inline(__always)  // (called from mutating methods, an outlined call copied the whole machine, ~730 bytes)
    func bestConnection() -> (id: Int, streams: Int)? {
        if let currentLimit, inFlight >= currentLimit { return nil }
        var best: (id: Int, score: Double)?
        var streams = 0
        for (id, entry) in entries {
            let load = entry.load
            guard load.phase == .ready, !load.retired, entry.assigned < streamBudget else { continue }
            let capacity = max(1, load.maxConcurrentStreams)
            streams += capacity
            guard entry.inFlight < capacity else { continue }
            var score = Double(entry.inFlight) / Double(capacity)
            if load.sendWindow < 4096 { score += 1 }  // flow-control window exhausted: prefer others
            if best == nil || score < best!.score { best = (id, score) }
        }
        guard let best else { return nil }
        return (best.id, streams)
    }

    /// The adaptive bound on `inFlight`; `nil` when adaptive concurrency is off.
    var limit: ConcurrencyLimit? { configuration.adaptiveConcurrency ? adaptiveLimit : nil }

    /// The limit's no-queue baseline (`nil` while unknown or when adaptive concurrency is off), read in place.
    var baseline: Duration? {
        @inline(__always) get { configuration.adaptiveConcurrency ? adaptiveLimit.baseline : nil }
    }

    /// Whether part of the capacity is kept from bulk (`urgentShare` > 0).
    var reservesForUrgent: Bool { bulkShare < 1 }

    /// How many bulk requests may be in flight: `floor(capacity × (1 − urgentShare))`, where the capacity is
    /// the smaller of the adaptive limit and the usable connections' streams (`streams`; whichever binds,
    /// bulk leaves its share of it free), and at least one, so bulk always moves (APNs advertises a single
    /// stream until a connection's first push succeeds). Bulk on draining connections counts too: the cap
    /// errs towards urgent while a connection is replaced.
    @inline(__always)
    func bulkCap(streams: Int) -> Int {
        bulkCap(capacity: min(currentLimit ?? .max, streams))
    }

    @inline(__always)
    func bulkCap(capacity: Int) -> Int {
        // The epsilon keeps 90 × (1 − 0.3) from flooring to 62.
        max(1, Int(Double(capacity) * bulkShare + 1e-9))
    }
}
