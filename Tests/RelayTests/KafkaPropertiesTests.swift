import Foundation
import Kafka
import Logging
import RelayApp
import Testing

/// `kafka.properties` keeps each value whole: librdkafka values hold commas (`debug=cgrp,topic`, cipher lists,
/// OAuth extensions, passwords), from a file's mapping or list, and from the environment or `--set` with `\,`.
@Suite struct KafkaPropertiesTests {
    private let minimal = [
        "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
    ]
    private let expected = ["debug": "cgrp,topic", "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384,TLS_AES_128_GCM_SHA256", "client.rack": "use1-az1"]

    private func configuration(file: String? = nil, environment: [String: String] = [:], overrides: [String: String] = [:]) async throws -> RelayAppConfiguration {
        let reader = try await RelayAppConfiguration.reader(file: file, environment: environment, overrides: minimal.merging(overrides) { $1 })
        return try RelayAppConfiguration(reader: reader)
    }

    private func withFile<T>(_ text: String, _ body: (String) async throws -> T) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("properties-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
    }

    @Test func aFilesMappingKeepsCommas() async throws {
        let yaml = """
            kafka:
              properties:
                debug: "cgrp,topic"
                ssl.cipher.suites: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384,TLS_AES_128_GCM_SHA256"
                client.rack: use1-az1
            """
        let properties = try await withFile(yaml) { try await configuration(file: $0).kafka.properties }
        #expect(properties == expected)
    }

    @Test func aFilesListKeepsEachItemWhole() async throws {
        let yaml = """
            kafka:
              properties:
                - debug=cgrp,topic
                - ssl.cipher.suites=ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384,TLS_AES_128_GCM_SHA256
                - client.rack=use1-az1
            """
        let properties = try await withFile(yaml) { try await configuration(file: $0).kafka.properties }
        #expect(properties == expected)
    }

    @Test func theEnvironmentAndSetEscapeCommas() async throws {
        let text = #"debug=cgrp\,topic,ssl.cipher.suites=ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384\,TLS_AES_128_GCM_SHA256,client.rack=use1-az1"#
        #expect(try await configuration(environment: ["APNS_RELAY_KAFKA_PROPERTIES": text]).kafka.properties == expected)
        #expect(try await configuration(overrides: ["kafka.properties": text]).kafka.properties == expected)
        // A backslash of its own is kept; `\\` is one backslash.
        let paths = try await configuration(overrides: ["kafka.consumerProperties": #"ssl.ca.location=C:\certs\ca.pem,sasl.kerberos.principal=a\\b"#])
        #expect(paths.kafka.consumerProperties == ["ssl.ca.location": #"C:\certs\ca.pem"#, "sasl.kerberos.principal": #"a\b"#])
    }

    @Test func theValuesReachLibrdkafka() async throws {
        // librdkafka refuses `debug=cgrp` followed by an entry `topic` with no value; whole, it takes it.
        var configuration = KafkaProducerConfiguration(bootstrapServers: ["127.0.0.1:1"])
        configuration.additionalProperties = try await self.configuration(overrides: ["kafka.properties": #"debug=cgrp\,topic"#]).kafka.properties
        let producer = try KafkaProducer(configuration: configuration, logger: Logger(label: "properties"))
        try await producer.close(timeout: .seconds(5))
    }

    @Test func anEntryWithoutEqualsIsRefusedWithoutItsText() async throws {
        let reader = try await RelayAppConfiguration.reader(
            file: nil, environment: [:], overrides: minimal.merging(["kafka.properties": "sasl.username=relay,hunter2-tail"]) { $1 })
        let error = try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }
        #expect(error.problems == [
            "configuration key 'kafka.properties' (APNS_RELAY_KAFKA_PROPERTIES): entry 2 is not name=value (its text is not shown: it may hold a secret)",
        ])
        #expect(!"\(error)".contains("hunter2"))
    }
}
