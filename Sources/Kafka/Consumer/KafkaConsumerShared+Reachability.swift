import CRdKafka
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ServiceSupport

/// Broker reachability (readiness's "Kafka unreachable") and the errors that decide it.
extension KafkaConsumerShared {
    /// Every error librdkafka reports for this consumer passes here (from its error callback).
    ///
    /// Kafka counts as unreachable when librdkafka says every broker is down (`_ALL_BROKERS_DOWN`), or when,
    /// after a broker connection failed (`_TRANSPORT`), no broker answers a metadata request. The second is
    /// needed because librdkafka before 2.9 raises `_ALL_BROKERS_DOWN` only when its count of down brokers
    /// becomes equal to its brokers with an address, and that count includes the group coordinator's logical
    /// broker, whose address comes and goes as the coordinator is lost and looked up: depending on the order
    /// in which the connections fail, the count passes the total without meeting it, and the error never
    /// comes (seen with the mock cluster on a loaded machine; "1/1 brokers are down", then "2/2", in a quiet one).
    func noteError(_ error: KafkaError, client: KafkaClient?) {
        if error.isFatal { fatalError.set(error) }
        if error.refusesCredentials { credentialsRefused.set(error) }
        if error.responseCode == .allBrokersDown {
            brokersDown.store(true, ordering: .releasing)
        } else if error.responseCode != KafkaResponseCode(RD_KAFKA_RESP_ERR__TRANSPORT) {
            return
        }
        guard let client else { return }
        startProbing(client)
    }

    /// Asks for metadata (on a thread of its own: the call blocks) until a broker answers, marking Kafka
    /// unreachable while none does. librdkafka says when every broker is down but not when one is back.
    private func startProbing(_ client: KafkaClient) {
        guard !isProbing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        do {
            try DedicatedThread.start(name: "kafka-reachable") { [self] in
                repeat {
                    while !isClosing.load(ordering: .acquiring) {
                        let reachable = client.withHandle { handle -> Bool in
                            var metadata: UnsafePointer<rd_kafka_metadata>?
                            guard rd_kafka_metadata(handle, 0, nil, &metadata, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR else { return false }
                            if let metadata { rd_kafka_metadata_destroy(metadata) }
                            return true
                        }
                        if reachable {
                            if brokersDown.exchange(false, ordering: .acquiringAndReleasing) { logger.info("Kafka reachable again") }
                            break
                        }
                        if !brokersDown.exchange(true, ordering: .acquiringAndReleasing) {
                            logger.warning("Kafka unreachable: no broker answers")
                        }
                        usleep(500_000)
                    }
                    isProbing.store(false, ordering: .releasing)
                    // An `_ALL_BROKERS_DOWN` that came while this probe was ending found it still running.
                } while brokersDown.load(ordering: .acquiring) && !isClosing.load(ordering: .acquiring)
                    && !isProbing.exchange(true, ordering: .acquiringAndReleasing)
            }
        } catch {
            // Readiness then stays as it is until the next such error tries again.
            logger.error("cannot watch for Kafka coming back", metadata: ["error": "\(error)"])
            isProbing.store(false, ordering: .releasing)
        }
    }
}
