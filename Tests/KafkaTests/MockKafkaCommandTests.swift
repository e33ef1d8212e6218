import Foundation
import Kafka
import TestSupport
import Testing

/// Runs the built `apns-relay-sandbox` binary (found by `BuiltProducts`).
@Suite("apns-relay-sandbox mock-kafka with an independent client")
struct MockKafkaCommandTests {
    static func relayBinary() throws -> URL { try BuiltProducts.executable("apns-relay-sandbox") }

    static let kcat = "/usr/bin/kcat"


    @Test(.timeLimit(.minutes(1)))
    func kcatListsAndConsumesTheTopicsOfTheMockCluster() async throws {
        let process = Process()
        process.executableURL = try Self.relayBinary()
        process.arguments = ["mock-kafka", "--brokers", "2", "--topic", "relay-input:3", "--topic", "relay-results:2"]
        let output = Pipe()
        process.standardOutput = output
        let exited = TestSignal()
        process.terminationHandler = { _ in exited.raise() }
        try startProcess(process)
        defer { if process.isRunning { process.terminate() } }

        let firstLine = EventRecorder<String>()
        Thread.detachNewThread {
            var buffer = Data()
            while !buffer.contains(UInt8(ascii: "\n")) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
            }
            firstLine.append(String(decoding: buffer.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self))
        }
        try await firstLine.waitUntil("the bootstrap line on mock-kafka's stdout", within: .seconds(15)) { !$0.isEmpty }
        let bootstrap = firstLine.entries[0]
        #expect(bootstrap.split(separator: ",").count == 2, "one host:port per broker: \(bootstrap)")
        #expect(bootstrap.hasPrefix("127.0.0.1:"))

        let metadata = try await runProcess(Self.kcat, ["-L", "-b", bootstrap], timeout: .seconds(20), check: true).stdout
        #expect(metadata.contains("2 brokers"), "\(metadata)")
        #expect(metadata.contains("topic \"relay-input\" with 3 partitions"), "\(metadata)")
        #expect(metadata.contains("topic \"relay-results\" with 2 partitions"), "\(metadata)")

        var configuration = KafkaProducerConfiguration(bootstrapServers: [bootstrap])
        configuration.messageTimeout = .seconds(20)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("test.producer"))
        try producer.start()
        try await produceKeyed(producer, topic: "relay-input", count: 30)
        try await producer.close()

        let consumed = try await runProcess(
            Self.kcat, ["-C", "-b", bootstrap, "-t", "relay-input", "-e", "-q", "-o", "beginning", "-f", "%k=%s\\n"],
            timeout: .seconds(20), check: true).stdout
        let lines = Set(consumed.split(separator: "\n").map(String.init))
        #expect(lines == Set((0..<30).map { "key-\($0)=value-\($0)" }))

        process.interrupt()  // SIGINT, as a person at a terminal would
        #expect(await exited.wait(within: .seconds(10)), "mock-kafka did not exit after SIGINT")
        #expect(process.terminationStatus == 0)
    }
}
