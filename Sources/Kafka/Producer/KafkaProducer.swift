import CRdKafka
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import ServiceSupport
import Synchronization

/// Where a record ended up, from its delivery report.
package struct KafkaDeliveryReport: Sendable, Hashable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var timestampMilliseconds: Int64?
}

/// A producer over librdkafka: idempotent with `acks=all` by default.
///
/// ``produce(topic:key:value:headers:partition:onDelivery:)`` queues a record and calls back with its
/// delivery report (the hot path: no task per record); ``send(topic:key:value:headers:partition:)`` awaits
/// the report. Either way a successful report means durable to the configured acks. A dedicated thread
/// polls librdkafka for delivery reports, errors and statistics; it never runs on Swift's cooperative pool.
///
/// Lifecycle: `init` makes the handle (nothing runs yet), ``start()`` starts the poll thread, ``close(timeout:)``
/// flushes and stops it. Records produced before `start()` wait in librdkafka for their reports until then.
package final class KafkaProducer: Sendable {
    let client: KafkaClient
    private let logger: Logger
    private let pollThread = PollThreadControl()
    /// Where the blocking transaction calls run, in turn: one thread while transactions keep coming, not
    /// one per call (a transaction makes two).
    package let transactionThread = WorkerThread(name: "kafka-txn")
    private let started = Atomic<Bool>(false)
    /// The poll timeout, in milliseconds.
    private let pollTimeout: Int32
    private let closeStarted = Atomic<Bool>(false)
    /// Held while a record is handed to librdkafka and while ``withdrawAll()`` purges, so that no record
    /// can be queued after the purge that was meant to fail it. Uncontended on the hot path.
    private let admission = BlockingMutex<Admission>(.open)

    private enum Admission { case open, withdrawn }

    /// Set once, when librdkafka reports a fatal error (e.g. the idempotent producer lost its ordering
    /// guarantees). From then on every send fails; the client must be recreated (for the relay: the process
    /// restarts). Await it with `fatalError.wait()`.
    package let fatalError: Latch<KafkaError>

    /// Set once, at the first refusal of the client's SASL credentials or TLS certificate by a broker
    /// (librdkafka goes on retrying with the same secret).
    package let credentialsRefused: Latch<KafkaError>

    /// Creates the producer's handle; its delivery-report thread starts in ``start()``.
    /// - Throws: ``KafkaError`` `configuration` for contradictory or rejected settings (with librdkafka's
    ///   message), `clientCreation` if librdkafka refuses to create the handle.
    package init(configuration: KafkaProducerConfiguration, logger: Logger) throws {
        let properties = try configuration.librdkafkaProperties()
        let fatalError = Latch<KafkaError>()
        let credentialsRefused = Latch<KafkaError>()
        let errorHandler = configuration.errorHandler
        let context = KafkaClientContext(
            logger: logger, statisticsHandler: configuration.statisticsHandler,
            errorHandler: { error in
                if error.isFatal { fatalError.set(error) }
                if error.refusesCredentials { credentialsRefused.set(error) }
                errorHandler?(error)
            },
            rebalanceHandler: nil)
        self.fatalError = fatalError
        self.credentialsRefused = credentialsRefused
        client = try KafkaClient(kind: .producer(deliveryReport: true), properties: properties, context: context)
        self.logger = logger
        pollTimeout = Int32(clamping: configuration.pollTimeout.kafkaMilliseconds)
    }

    /// Starts the thread that serves delivery reports, errors and statistics. Once; later calls do nothing.
    /// - Throws: ``KafkaError`` `clientCreation` when the kernel refuses the thread.
    package func start() throws(KafkaError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let timeout = pollTimeout
        let client = self.client
        let pollThread = self.pollThread
        // The thread holds the client and the stop flag, not the producer, so releasing the producer stops it.
        do {
            try DedicatedThread.start(name: "kafka-producer") {
                while !pollThread.isStopping.load(ordering: .acquiring) {
                    client.withHandle { _ = rd_kafka_poll($0, timeout) }
                }
                pollThread.stopped.set()
            }
        } catch {
            pollThread.stopped.set()  // no thread: nothing to wait for on close
            throw KafkaError(code: .clientCreation, message: "\(error)")
        }
    }

    deinit {
        pollThread.isStopping.store(true, ordering: .releasing)
        if started.load(ordering: .acquiring), !closeStarted.load(ordering: .acquiring) {
            logger.warning("KafkaProducer released without close(); unsent records may be lost")
        }
    }

    /// What a record's delivery report says: where the broker stored it, or why it was not stored.
    package typealias DeliveryHandler = @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void

    /// Hands one record to librdkafka and returns at once; `onDelivery` runs exactly once, with its delivery
    /// report, unless this throws (then it never runs).
    ///
    /// The hot path for callers that publish many records: no task and no continuation per record.
    /// `onDelivery` runs on the producer's poll thread (or the thread of a `flush`/`close`): it must not
    /// block; it may call `produce` again (e.g. to publish a replacement record).
    /// - Parameters:
    ///   - partition: a fixed partition, or `nil` to let the partitioner hash the key.
    ///   - timestampMilliseconds: the record's create time (Unix milliseconds), or `nil` for now.
    /// - Throws: ``KafkaError`` `closed` after ``close(timeout:)`` or ``withdrawAll()``, `enqueue` when
    ///   librdkafka refuses the record (queue full, unknown partition, too large, fatal state).
    package func produce(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        timestampMilliseconds: Int64? = nil, onDelivery: @escaping DeliveryHandler
    ) throws(KafkaError) {
        try produce(
            topic: topic, key: key?[...], value: value, headers: headers, partition: partition,
            timestampMilliseconds: timestampMilliseconds, handler: ClosureDeliveryHandler(onDelivery))
    }

    package func produce(
        topic: String, key: ArraySlice<UInt8>?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        onDelivery: @escaping DeliveryHandler
    ) throws(KafkaError) {
        try produce(topic: topic, key: key, value: value, headers: headers, partition: partition, handler: ClosureDeliveryHandler(onDelivery))
    }

    /// As ``produce(topic:key:value:headers:partition:onDelivery:)``, with the delivery report going to
    /// `handler` (retained until then): a caller that already has an object per record, or per group of
    /// records, allocates nothing more per record.
    package func produce(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        handler: some KafkaDeliveryHandler
    ) throws(KafkaError) {
        try produce(topic: topic, key: key?[...], value: value, headers: headers, partition: partition, handler: handler)
    }

    /// As ``produce(topic:key:value:headers:partition:handler:)``, with the key a slice (of a consumed record's
    /// buffer, say: not copied into an array of its own first).
    package func produce(
        topic: String, key: ArraySlice<UInt8>?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil,
        timestampMilliseconds: Int64? = nil, handler: some KafkaDeliveryHandler
    ) throws(KafkaError) {
        guard !closeStarted.load(ordering: .acquiring) else { throw KafkaError.closed("producer is closed") }
        // Retained: librdkafka holds the pointer until the delivery report, whose callback takes the
        // retained value back (kafkaDeliveryReportCallback). Released below if produce fails instead.
        let opaque = Unmanaged.passRetained(handler as AnyObject).toOpaque()
        let failure = admission.withLock { admission -> KafkaError? in
            guard admission == .open else { return KafkaError.closed("producer withdrew its records (shutting down)") }
            return client.withHandle { handle in
                Self.produce(handle: handle, topic: topic, partition: partition, key: key, value: value,
                             headers: headers, timestampMilliseconds: timestampMilliseconds, opaque: opaque)
            }.map { KafkaError(code: .enqueue, consuming: $0) }
        }
        if let failure {
            Unmanaged<AnyObject>.fromOpaque(opaque).release()
            throw failure
        }
    }

    /// Sends one record and waits for its delivery report (``produce(topic:key:value:headers:partition:onDelivery:)``
    /// with a continuation).
    ///
    /// Key and value are copied before this returns to the event loop; `nil` sends a null key or value.
    /// Cancelling the calling task does not withdraw the record (it is already queued); the report is
    /// still awaited.
    /// - Returns: the partition and offset the broker assigned.
    /// - Throws: ``KafkaError`` `enqueue` when librdkafka refuses the record, `delivery` with the broker's or
    ///   librdkafka's code when delivery failed after librdkafka's own retries.
    package func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], partition: Int32? = nil
    ) async throws -> KafkaDeliveryReport {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try produce(topic: topic, key: key, value: value, headers: headers, partition: partition) { result in
                    continuation.resume(with: result)
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Sends a UTF-8 key and value; see ``send(topic:key:value:headers:partition:)``.
    package func send(
        topic: String, key: String?, value: String?, headers: [KafkaHeader] = [], partition: Int32? = nil
    ) async throws -> KafkaDeliveryReport {
        try await send(topic: topic, key: key.map { Array($0.utf8) }, value: value.map { Array($0.utf8) },
                       headers: headers, partition: partition)
    }

    /// Waits (on a dedicated thread) until every queued record has its delivery report.
    /// - Throws: ``KafkaError`` `timedOut` if records are still outstanding after `timeout`.
    package func flush(timeout: Duration) async throws {
        let client = self.client
        let code = await DedicatedThread.run(name: "kafka-flush") {
            client.withHandle { rd_kafka_flush($0, Int32(clamping: timeout.kafkaMilliseconds)) }.rawValue
        }
        let error = rd_kafka_resp_err_t(rawValue: code)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            let outstanding = client.withHandle { rd_kafka_outq_len($0) }
            throw KafkaError(code: .timedOut, rawResponse: error,
                             message: "\(outstanding) records/requests still outstanding after \(timeout)")
        }
    }

    /// Stops taking records and fails every record not yet acknowledged: each waiting `send` throws
    /// `_PURGE_QUEUE`/`_PURGE_INFLIGHT` (on the poll thread's next poll), later sends throw `closed`.
    ///
    /// For a shutdown that must not wait for a broker that is gone: a purged record may still have reached
    /// the broker, so its sender must treat it as not durable (the relay never stores its offset).
    package func withdrawAll() async {
        await DedicatedThread.run(name: "kafka-withdraw") { [self] in
            admission.withLock { admission in
                admission = .withdrawn
                client.withHandle { handle in
                    _ = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
                }
            }
        }
    }

    /// The SASL user and password for connections made from now on (PLAIN and SCRAM).
    package func setSASLCredentials(username: String, password: String) throws(KafkaError) {
        try client.setSASLCredentials(username: username, password: password)
    }

    /// Raises a fatal error in librdkafka as if the broker had caused one (`rd_kafka_test_fatal_error`),
    /// for tests of what the application does then. Only an idempotent producer has fatal errors.
    package func injectFatalError(_ code: KafkaResponseCode, reason: String) {
        client.withHandle { handle in _ = rd_kafka_test_fatal_error(handle, code.raw, reason) }
    }

    /// Flushes for at most `timeout`, fails whatever is still queued (each waiting `send` throws with
    /// `_PURGE_QUEUE`/`_PURGE_INFLIGHT`) and stops the poll thread. Further sends throw `closed`.
    package func close(timeout: Duration = .seconds(30)) async throws {
        guard !closeStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var flushError: (any Error)?
        do { try await flush(timeout: timeout) } catch { flushError = error }
        if flushError != nil {
            let client = self.client
            await DedicatedThread.run(name: "kafka-purge") {
                client.withHandle { handle in
                    _ = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
                    // Purged records get their (failed) delivery reports on the next polls.
                    _ = rd_kafka_flush(handle, 1000)
                }
            }
        }
        pollThread.isStopping.store(true, ordering: .releasing)
        if started.load(ordering: .acquiring) {
            _ = await pollThread.stopped.wait(timeout: .seconds(5), ignoringCancellation: true)
        }
        // A send that passed its closed check just before close began may have queued a record after the
        // flush: fail it (and anything else left) so that no caller waits for a report nobody polls for.
        let client = self.client
        await DedicatedThread.run(name: "kafka-purge-end") {
            client.withHandle { handle in
                _ = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
                _ = rd_kafka_flush(handle, 1000)
            }
        }
        if let flushError { throw flushError }
    }

}

/// Stop flag and exit signal of a poll thread.
final class PollThreadControl: Sendable {
    let isStopping = Atomic<Bool>(false)
    let stopped = Latch<Void>()
}

/// What runs when a record's delivery report arrives, carried through librdkafka as the message's opaque
/// (``KafkaProducer/produce(topic:key:value:headers:partition:handler:)``): an object of the caller's that
/// keeps a record's (or an event's) own state with its report, without a closure per record.
package protocol KafkaDeliveryHandler: AnyObject, Sendable {
    /// Runs exactly once per record produced with this handler, on the producer's poll thread (or the
    /// thread of a `flush`/`close`): it must not block; it may produce again.
    func delivered(_ report: Result<KafkaDeliveryReport, KafkaError>)
}

/// A closure as a delivery handler.
final class ClosureDeliveryHandler: KafkaDeliveryHandler {
    let handler: KafkaProducer.DeliveryHandler
    init(_ handler: @escaping KafkaProducer.DeliveryHandler) { self.handler = handler }
    func delivered(_ report: Result<KafkaDeliveryReport, KafkaError>) { handler(report) }
}


/// Served by rd_kafka_poll on the producer's poll thread (or a flush thread).
let kafkaDeliveryReportCallback: @convention(c) (OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?) -> Void = {
    _, message, _ in
    guard let message, let opaque = message.pointee._private else { return }
    // Balances the passRetained in KafkaProducer.produce: each record has exactly one delivery report.
    // Only handlers are produced with an opaque (`produce(…handler:)`): the cast cannot fail.
    let callback = Unmanaged<AnyObject>.fromOpaque(opaque).takeRetainedValue() as! any KafkaDeliveryHandler
    let raw = message.pointee
    let topic = raw.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
    if raw.err == RD_KAFKA_RESP_ERR_NO_ERROR {
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        callback.delivered(.success(KafkaDeliveryReport(
            topic: topic, partition: raw.partition, offset: raw.offset,
            timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp)))
    } else {
        callback.delivered(.failure(KafkaError(
            code: .delivery, rawResponse: raw.err,
            message: "\(topic)[\(raw.partition)]: \(KafkaResponseCode(raw.err).explanation)")))
    }
}
