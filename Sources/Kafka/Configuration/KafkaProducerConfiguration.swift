/// Settings of a ``KafkaProducer``. Idempotent with `acks=all` unless told otherwise.
package struct KafkaProducerConfiguration: Sendable {
    /// `bootstrap.servers`, as `host:port` entries.
    package var bootstrapServers: [String]
    /// `client.id`.
    package var clientID: String = "apns-relay"
    /// `enable.idempotence`. When true, `acks` must be `all` and librdkafka keeps per-partition order and
    /// no duplicates across its own retries.
    package var idempotent: Bool = true
    /// `acks`: `-1`/`all`, `0` or `1`. Must be all when ``idempotent``.
    package var acks: String = "all"
    /// `message.timeout.ms`: how long librdkafka may keep retrying a message before reporting it failed.
    package var messageTimeout: Duration = .seconds(300)
    /// `linger.ms`.
    package var linger: Duration = .milliseconds(5)
    /// `statistics.interval.ms`; `nil` disables statistics.
    package var statisticsInterval: Duration? = nil
    /// Receives librdkafka's statistics JSON on the poll thread (keep it short).
    package var statisticsHandler: (@Sendable (String) -> Void)? = nil
    /// Receives errors librdkafka reports through its error callback (they are also logged).
    package var errorHandler: (@Sendable (KafkaError) -> Void)? = nil
    /// How long one blocking `rd_kafka_poll` on the delivery-report thread may wait.
    package var pollTimeout: Duration = .milliseconds(100)
    /// `partitioner`: how a keyed record's partition is chosen; `nil`: librdkafka's (`consistent_random`,
    /// CRC32, which puts a key on another partition than a Java producer would).
    package var partitioner: KafkaPartitioner? = nil
    /// Any other librdkafka property, passed through verbatim.
    package var additionalProperties: [String: String] = [:]
    /// `transactional.id`: set, the producer is transactional (``KafkaProducer/initTransactions(timeout:)``
    /// first; every record then belongs to a transaction). It must be stable across restarts of the same
    /// instance, so that a restarted one fences its predecessor, and unique among live instances.
    package var transactionalID: String? = nil
    /// `transaction.timeout.ms`: how long the broker lets a transaction stay open before aborting it (what a
    /// crashed producer's open transaction holds `read_committed` readers back at most, on a broker that
    /// enforces it).
    package var transactionTimeout: Duration = .seconds(60)

    package init(bootstrapServers: [String]) {
        self.bootstrapServers = bootstrapServers
    }

    func librdkafkaProperties() throws(KafkaError) -> [String: String] {
        let normalizedAcks = acks == "-1" ? "all" : acks
        guard ["all", "0", "1"].contains(normalizedAcks) else {
            throw KafkaError(code: .configuration, message: "acks must be all, -1, 0 or 1, not '\(acks)'")
        }
        if idempotent && normalizedAcks != "all" {
            throw KafkaError(code: .configuration,
                             message: "an idempotent producer requires acks=all, not acks=\(acks)")
        }
        var owned: [String: String] = [
            "bootstrap.servers": bootstrapServers.joined(separator: ","),
            "client.id": clientID,
            "enable.idempotence": idempotent ? "true" : "false",
            "acks": normalizedAcks,
            "message.timeout.ms": String(messageTimeout.kafkaMilliseconds),
            "linger.ms": String(linger.kafkaMilliseconds),
        ]
        if let partitioner { owned["partitioner"] = partitioner.rawValue }
        if let statisticsInterval {
            owned["statistics.interval.ms"] = String(statisticsInterval.kafkaMilliseconds)
        }
        if let transactionalID {
            guard idempotent else {
                throw KafkaError(code: .configuration, message: "a transactional producer is idempotent: set idempotent")
            }
            owned["transactional.id"] = transactionalID
            owned["transaction.timeout.ms"] = String(transactionTimeout.kafkaMilliseconds)
            // librdkafka refuses a record timeout longer than the transaction's: a record still unsent when
            // its transaction times out could only fail.
            owned["message.timeout.ms"] = String(min(messageTimeout, transactionTimeout).kafkaMilliseconds)
        }
        var additional = additionalProperties
        // librdkafka spells the same thing three ways; compare one spelling.
        for key in ["acks", "request.required.acks"] {
            if additional[key] == "-1" { additional[key] = "all" }
        }
        // An alias would otherwise pass the comparison below and then override the typed field in librdkafka.
        for (alias, key) in [("request.required.acks", "acks"), ("queue.buffering.max.ms", "linger.ms")] {
            guard let value = additional.removeValue(forKey: alias) else { continue }
            if let named = additional[key], named != value {
                throw KafkaError(code: .configuration, message: "\(key)=\(named) contradicts \(alias)=\(value)")
            }
            additional[key] = value
        }
        return try KafkaPropertyMerge.merge(owned: owned, additional: additional, guarantees: [:])
    }
}

/// Merges typed settings with pass-through properties, refusing contradictions.
enum KafkaPropertyMerge {
    /// Properties whose values must never appear in logs or error messages.
    static let secretKeys: Set<String> = [
        "sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
        "sasl.oauthbearer.client.secret", "ssl_key",
    ]

    static func printable(_ key: String, _ value: String) -> String {
        secretKeys.contains(key) ? "<secret>" : value
    }

    /// - Parameters:
    ///   - owned: properties set by typed fields.
    ///   - additional: the caller's pass-through properties; each may repeat an owned one with the same value.
    ///   - guarantees: owned properties that exist to uphold a guarantee, with the reason, for the message.
    static func merge(
        owned: [String: String], additional: [String: String], guarantees: [String: String]
    ) throws(KafkaError) -> [String: String] {
        var merged = owned
        for (key, value) in additional {
            if let ours = owned[key] {
                if ours != value {
                    let reason = guarantees[key].map { " (\($0))" } ?? " (set it through the typed configuration field)"
                    throw KafkaError(
                        code: .configuration,
                        message: "property \(key)=\(printable(key, value)) contradicts \(key)=\(printable(key, ours))\(reason)")
                }
            } else {
                merged[key] = value
            }
        }
        return merged
    }
}
