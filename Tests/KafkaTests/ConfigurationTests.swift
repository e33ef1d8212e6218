import Logging
import Synchronization
import TestSupport
import Testing
@testable import Kafka

@Suite("Configuration is checked at start")
struct ConfigurationTests {
    private func consumerError(_ change: (inout KafkaConsumerConfiguration) -> Void) -> KafkaError? {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: ["127.0.0.1:1"], groupID: "g")
        change(&configuration)
        do {
            _ = try KafkaConsumer(configuration: configuration, logger: testLogger("test.config"))
            return nil
        } catch {
            return error as? KafkaError
        }
    }

    private func producerError(_ change: (inout KafkaProducerConfiguration) -> Void) -> KafkaError? {
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        change(&configuration)
        do {
            let producer = try KafkaProducer(configuration: configuration, logger: testLogger("test.config"))
            _ = producer
            return nil
        } catch {
            return error as? KafkaError
        }
    }

    @Test func automaticOffsetStoreIsRejected() {
        let error = consumerError { $0.additionalProperties["enable.auto.offset.store"] = "true" }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("enable.auto.offset.store") == true)
    }

    @Test func repeatingAnOwnedPropertyWithTheSameValueIsAccepted() {
        #expect(consumerError { $0.additionalProperties["enable.auto.offset.store"] = "false" } == nil)
    }

    @Test(arguments: [["cooperative-stiky"], ["range", "cooperative-sticky"], []])
    func badAssignmentStrategiesAreRejected(assignors: [String]) {
        let error = consumerError { $0.partitionAssignmentStrategy = .init(assignors: assignors) }
        #expect(error?.code == .configuration)
    }

    @Test func idempotenceCannotBeSwitchedOffBehindTheTypedField() {
        let error = producerError { $0.additionalProperties["enable.idempotence"] = "false" }
        #expect(error?.code == .configuration)
    }

    @Test func idempotentProducerRequiresAcksAll() {
        #expect(producerError { $0.acks = "1" }?.code == .configuration)
        #expect(producerError { $0.additionalProperties["request.required.acks"] = "1" }?.code == .configuration)
        #expect(producerError { $0.additionalProperties["acks"] = "-1" } == nil)
        #expect(producerError { $0.idempotent = false; $0.acks = "1" } == nil)
    }

    @Test func lingerCannotBeChangedBehindTheTypedFieldThroughItsAlias() {
        let error = producerError { $0.linger = .milliseconds(20); $0.additionalProperties["queue.buffering.max.ms"] = "50" }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("linger.ms=20") == true, "\(String(describing: error))")
        #expect(producerError { $0.linger = .milliseconds(20); $0.additionalProperties["queue.buffering.max.ms"] = "20" } == nil)
    }

    @Test func librdkafkaRejectionCarriesItsMessage() {
        let error = consumerError { $0.additionalProperties["no.such.property"] = "1" }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("No such configuration property") == true, "\(String(describing: error))")
        let secret = consumerError {
            $0.additionalProperties["sasl.mechanisms"] = "PLAIN"
            $0.additionalProperties["sasl.password"] = "hunter2"
            $0.additionalProperties["security.protocol"] = "nonsense"
        }
        #expect(secret?.code == .configuration)
        #expect(secret?.message.contains("hunter2") == false)
    }

    @Test func maxPollIntervalBelowSessionTimeoutIsRejected() {
        let error = consumerError { $0.sessionTimeout = .seconds(10); $0.maxPollInterval = .seconds(5) }
        #expect(error?.code == .configuration)
    }
}

@Suite("librdkafka logs and errors")
struct LoggingTests {
    @Test func syslogLevelsMapToLoggerLevels() {
        let expected: [Int32: Logger.Level] = [0: .critical, 1: .critical, 2: .critical, 3: .error, 4: .warning,
                                               5: .notice, 6: .info, 7: .debug]
        for (syslog, level) in expected {
            #expect(KafkaLogLevel.loggerLevel(syslogLevel: syslog) == level)
        }
    }

    /// A refused connection shows up in the log (through the log callback) and at the error handler.
    @Test(.timeLimit(.minutes(1)))
    func librdkafkaLogsAndErrorsAreBridged() async throws {
        let records = LogRecorder()
        var logger = records.logger(label: "test.bridge")
        logger.logLevel = .debug
        let errors = EventRecorder<KafkaError>()
        // Port 1 on loopback: refused immediately, no network involved.
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        configuration.errorHandler = { errors.append($0) }
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        try await errors.waitUntil("an error callback for the refused connection", within: .seconds(10)) { !$0.isEmpty }
        #expect(errors.entries.contains { $0.responseCode == .brokerTransport || $0.responseCode == .allBrokersDown })
        try await records.records.waitUntil("a librdkafka log line about the connection", within: .seconds(10)) {
            $0.contains { $0.source == "librdkafka" && $0.message.contains("127.0.0.1:1") }
        }
        try? await producer.close(timeout: .milliseconds(100))
    }
}
