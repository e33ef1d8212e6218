import CRdKafka
import Logging
import Synchronization

/// Receives a consumer's rebalance callbacks. Implemented by the consumer's shared state; it gets the
/// `rd_kafka_t` as an argument, so it holds no reference back to the client (no retain cycle).
package protocol KafkaRebalanceHandling: AnyObject, Sendable {
    func handleRebalance(
        handle: OpaquePointer, error: rd_kafka_resp_err_t,
        partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>)
}

/// What librdkafka's callbacks need, reached through the handle's opaque pointer.
package final class KafkaClientContext: Sendable {
    let logger: Logger
    let statisticsHandler: (@Sendable (String) -> Void)?
    let errorHandler: (@Sendable (KafkaError) -> Void)?
    let rebalanceHandler: (any KafkaRebalanceHandling)?

    package init(
        logger: Logger,
        statisticsHandler: (@Sendable (String) -> Void)?,
        errorHandler: (@Sendable (KafkaError) -> Void)?,
        rebalanceHandler: (any KafkaRebalanceHandling)?
    ) {
        self.logger = logger
        self.statisticsHandler = statisticsHandler
        self.errorHandler = errorHandler
        self.rebalanceHandler = rebalanceHandler
    }
}

/// Owns one `rd_kafka_t` (producer or consumer) and the context its callbacks use.
///
/// The handle is destroyed in `deinit`; it is lent out only through ``withHandle(_:)``.
// @unchecked Sendable: `handle` is immutable after init and librdkafka's client API is thread-safe for the
// calls we make; `destroyFlags` is atomic.
package final class KafkaClient: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Kept alive as long as the handle: librdkafka holds it unretained as its opaque (see `init`).
    let context: KafkaClientContext
    /// Consumers that were never closed are destroyed without a consumer close, so that no rebalance callback
    /// runs while this object is being torn down.
    let destroyWithoutConsumerClose = Atomic<Bool>(false)

    package enum Kind {
        case producer(deliveryReport: Bool)
        case consumer
    }

    package init(kind: Kind, properties: [String: String], context: KafkaClientContext) throws(KafkaError) {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError(code: .clientCreation, message: "rd_kafka_conf_new returned NULL")
        }
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            var errorText = [CChar](repeating: 0, count: 512)
            let result = rd_kafka_conf_set(conf, key, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                // Ownership: the conf is still ours until rd_kafka_new succeeds.
                rd_kafka_conf_destroy(conf)
                throw KafkaError(
                    code: .configuration,
                    message: "\(key)=\(KafkaPropertyMerge.printable(key, value)): \(String(errorBuffer: errorText))",
                    isRetriable: false)
            }
        }
        // Unretained: `self.context` keeps the context alive for as long as the handle exists, because the
        // handle is destroyed in `deinit` before stored properties are released.
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(context).toOpaque())
        rd_kafka_conf_set_log_cb(conf, kafkaLogCallback)
        rd_kafka_conf_set_error_cb(conf, kafkaErrorCallback)
        if context.statisticsHandler != nil {
            rd_kafka_conf_set_stats_cb(conf, kafkaStatisticsCallback)
        }
        let type: rd_kafka_type_t
        switch kind {
        case .producer(let deliveryReport):
            type = RD_KAFKA_PRODUCER
            if deliveryReport { rd_kafka_conf_set_dr_msg_cb(conf, kafkaDeliveryReportCallback) }
        case .consumer:
            type = RD_KAFKA_CONSUMER
            if context.rebalanceHandler != nil { rd_kafka_conf_set_rebalance_cb(conf, kafkaRebalanceCallback) }
        }
        var errorText = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(type, conf, &errorText, errorText.count) else {
            // Ownership: rd_kafka_new takes the conf only on success.
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: .clientCreation, message: String(errorBuffer: errorText), isRetriable: false)
        }
        self.handle = handle
        self.context = context
    }

    deinit {
        if destroyWithoutConsumerClose.load(ordering: .acquiring) {
            rd_kafka_destroy_flags(handle, Int32(RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE))
        } else {
            rd_kafka_destroy(handle)
        }
    }

    /// Replaces the SASL user and password librdkafka presents on its next connections (existing ones stay
    /// authenticated as they were): how a rotated password file takes effect without a restart.
    func setSASLCredentials(username: String, password: String) throws(KafkaError) {
        if let error = rd_kafka_sasl_set_credentials(handle, username, password) {
            throw KafkaError(code: .configuration, consuming: error)
        }
    }

    /// Lends the `rd_kafka_t`; it must not escape `body`.
    package func withHandle<T, E: Error>(_ body: (OpaquePointer) throws(E) -> T) throws(E) -> T {
        try body(handle)
    }

    /// The librdkafka client's name (`client.id#role-N`), for logs.
    var name: String { String(cString: rd_kafka_name(handle)) }
}

// MARK: - C callbacks. Each does the minimum and hands over to Swift.

private func context(of handle: OpaquePointer?) -> KafkaClientContext? {
    guard let handle, let opaque = rd_kafka_opaque(handle) else { return nil }
    // Unretained: the KafkaClient that owns the handle owns the context (see KafkaClient.init).
    return Unmanaged<KafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
}

/// Called from librdkafka's internal threads (we do not route logs to a queue); Logger is thread-safe.
private let kafkaLogCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Void = {
    handle, level, facility, text in
    guard let context = context(of: handle) else { return }
    let facility = facility.map { String(cString: $0) } ?? ""
    context.logger.log(
        level: KafkaLogLevel.loggerLevel(syslogLevel: level),
        "\(text.map { String(cString: $0) } ?? "")",
        metadata: ["kafka.facility": "\(facility)"],
        source: "librdkafka")
}

/// Served by rd_kafka_poll / rd_kafka_consumer_poll on our poll threads.
private let kafkaErrorCallback: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = {
    handle, code, reason, _ in
    guard let handle, let context = context(of: handle) else { return }
    var error = KafkaError(
        code: .broker, rawResponse: rd_kafka_resp_err_t(rawValue: code),
        message: reason.map { String(cString: $0) })
    if code == RD_KAFKA_RESP_ERR__FATAL.rawValue {
        // The real cause of a fatal error is only available through rd_kafka_fatal_error, read right here.
        var text = [CChar](repeating: 0, count: 512)
        let underlying = rd_kafka_fatal_error(handle, &text, text.count)
        error = KafkaError(code: .fatal, responseCode: KafkaResponseCode(underlying),
                           message: String(errorBuffer: text), isRetriable: false, isFatal: true)
    }
    // Connectivity hiccups are routine with librdkafka (it reconnects); real trouble is logged as error.
    let level: Logger.Level =
        error.isFatal ? .critical : (code == RD_KAFKA_RESP_ERR__TRANSPORT.rawValue ? .warning : .error)
    context.logger.log(level: level, "librdkafka error", metadata: ["kafka.error": "\(error)"])
    context.errorHandler?(error)
}

private let kafkaStatisticsCallback: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutableRawPointer?) -> Int32 = {
    handle, json, length, _ in
    guard let json, let context = context(of: handle) else { return 0 }
    let text = String(decoding: UnsafeRawBufferPointer(start: json, count: length), as: UTF8.self)
    context.statisticsHandler?(text)
    return 0  // 0: librdkafka frees the JSON buffer.
}

private let kafkaRebalanceCallback: @convention(c) (OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, UnsafeMutableRawPointer?) -> Void = {
    handle, error, partitions, _ in
    guard let handle, let partitions, let handler = context(of: handle)?.rebalanceHandler else { return }
    handler.handleRebalance(handle: handle, error: error, partitions: partitions)
}

extension String {
    /// Reads a NUL-terminated error buffer filled by librdkafka.
    init(errorBuffer: [CChar]) {
        let bytes = errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        self.init(decoding: bytes, as: UTF8.self)
    }
}
