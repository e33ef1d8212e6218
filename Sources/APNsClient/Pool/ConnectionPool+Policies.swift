import APNsCore

/// The pool's decisions that are rules rather than bookkeeping: what an outcome teaches the adaptive limit,
/// which connections are latency outliers, how long to wait before reconnecting.
extension ConnectionPool {
    /// Feeds one outcome to the adaptive limit: an answer's latency, or congestion (a timeout after the
    /// request was sent). Answers' statuses say nothing about load here: 429 TooManyRequests is about one
    /// device token, and a 503 comes as fast as a 200.
    static func learn(
        from result: Result<APNsResponse, APNsClientError>, latency: Duration?, countsAsTimeout: Bool, into s: inout State
    ) {
        guard var limit = s.limit, let latency else { return }
        switch result {
        case .success:
            limit.answered(after: latency, inFlight: s.inFlight)
        case .failure(let error) where countsAsTimeout && error.transportFailure == .timedOut:
            limit.congested()
        case .failure:
            return
        }
        s.limit = limit
    }

    func retireLatencyOutliers(_ s: inout State) {
        Self.refreshLoadsIfStale(&s)
        let live = s.entries.values.filter { $0.load.phase == .ready && !$0.load.retired && $0.load.latency > 0 }
        guard live.count >= 3 else { return }
        let latencies = live.map { $0.load.latency }.sorted()
        let median = latencies[latencies.count / 2]
        for entry in live where entry.load.latency > max(0.05, median * configuration.pool.latencyOutlierFactor) {
            logger.notice("retiring latency outlier", metadata: ["apns.connection": "\(entry.connection.id)", "latency": "\(entry.load.latency)"])
            entry.connection.drain()
            s.entries[entry.connection.id]?.load.retired = true
        }
    }

    func backoff(attempt: Int) -> Duration {
        let pool = configuration.pool
        let exponent = min(attempt - 1, 20)
        let ceiling = min(pool.reconnectBackoffBase * (1 << exponent), pool.reconnectBackoffMax)
        return ceiling * Double.random(in: 0.5...1.0)  // jitter: replicas must not reconnect in lockstep
    }
}
