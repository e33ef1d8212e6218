import ArgumentParser
import Foundation
import Kafka
import Logging

/// Consume-path benchmark: our KafkaConsumer against kcat on the same topic of the same cluster.
///
/// `produce` fills a topic with keyed 200-byte records; `consume` reads them through KafkaConsumer (group
/// member, offsets stored per record as apns-relay does) and `kcat` reads them with kcat. Each prints one
/// line: records/s (first record to last; our group join is excluded, kcat's start-up is included) and CPU
/// per record (user+sys of the whole consuming process, start to end).
@main
struct KafkaConsumeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kafka-consume-benchmark",
        subcommands: [Produce.self, Consume.self, Kcat.self])

    struct Options: ParsableArguments {
        @Option(help: "bootstrap.servers") var bootstrap: String
        @Option(help: "Topic") var topic: String = "bench"
        @Option(help: "Number of records") var count: Int = 160_000
    }

    struct Produce: AsyncParsableCommand {
        @OptionGroup var options: Options
        @Option(help: "Value size in bytes") var valueSize: Int = 200

        func run() async throws {
            var configuration = KafkaProducerConfiguration(bootstrapServers: [options.bootstrap])
            configuration.additionalProperties["queue.buffering.max.messages"] = "1000000"
            let producer = try KafkaProducer(configuration: configuration, logger: quietLogger())
            try producer.start()
            let value = [UInt8](repeating: UInt8(ascii: "x"), count: valueSize)
            let started = ContinuousClock.now
            let window = 20_000
            for base in stride(from: 0, to: options.count, by: window) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in base..<min(base + window, options.count) {
                        group.addTask {
                            _ = try await producer.send(topic: options.topic, key: Array("key-\(index)".utf8), value: value)
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await producer.close()
            let elapsed = ContinuousClock.now - started
            print("produced \(options.count) records of \(valueSize) bytes in \(format(elapsed.seconds)) s")
        }
    }

    struct Consume: AsyncParsableCommand {
        @OptionGroup var options: Options
        @Flag(help: "Skip storing an offset per record") var noStore = false
        @Option(help: "KafkaConsumerConfiguration.bufferCapacity") var buffer: Int = 10_000
        @Flag(help: "Log the consumer's debug lines (pauses, resumes) to stderr") var debug = false
        @Option(help: "Extra librdkafka property NAME=VALUE (repeatable)") var property: [String] = []

        func run() async throws {
            let cpuAtStart = processCPUSeconds()
            var configuration = KafkaConsumerConfiguration(
                bootstrapServers: [options.bootstrap], groupID: "bench-\(UUID().uuidString.prefix(8))")
            configuration.sessionTimeout = .seconds(6)
            configuration.bufferCapacity = buffer
            for entry in property {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { configuration.additionalProperties[parts[0]] = parts[1] }
            }
            let consumer = try KafkaConsumer(configuration: configuration, logger: quietLogger(debug: debug))
            try consumer.subscribe(topics: [options.topic])
            try consumer.start()
            // Property-wrapper getters of ArgumentParser are slow; read them once, not per record.
            let count = options.count
            let store = !noStore
            var received = 0
            var firstAt: ContinuousClock.Instant?
            var bytes = 0
            var iterator = consumer.events.makeAsyncIterator()
            while received < count {
                guard let event = await iterator.next() else { break }
                switch event {
                case .message(let message):
                    if firstAt == nil { firstAt = .now }
                    received += 1
                    bytes += (message.value?.count ?? 0) + (message.key?.count ?? 0)
                    if store { try consumer.storeOffset(for: message) }
                case .partitionsRevoked(let revocation):
                    revocation.acknowledge()
                case .partitionsAssigned, .partitionsLost:
                    break
                }
            }
            let elapsed = ContinuousClock.now - (firstAt ?? .now)
            let cpu = processCPUSeconds() - cpuAtStart
            try await consumer.close()
            report("KafkaConsumer", received: received, seconds: elapsed.seconds, cpuSeconds: cpu)
        }
    }

    struct Kcat: AsyncParsableCommand {
        @OptionGroup var options: Options
        @Option(help: "kcat executable") var kcat = "/usr/bin/kcat"

        func run() async throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: kcat)
            process.arguments = ["-C", "-b", options.bootstrap, "-t", options.topic, "-o", "beginning", "-e", "-q",
                                 "-f", "%k %s\\n"]
            let output = Pipe()
            process.standardOutput = output
            let cpuAtStart = childrenCPUSeconds()
            let started = ContinuousClock.now
            try process.run()
            // Count lines as kcat writes them (kcat has to format and write every record, as we copy it).
            var received = 0
            let handle = output.fileHandleForReading
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                received += chunk.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            }
            process.waitUntilExit()
            let elapsed = ContinuousClock.now - started
            report("kcat", received: received, seconds: elapsed.seconds, cpuSeconds: childrenCPUSeconds() - cpuAtStart)
        }
    }
}

func quietLogger(debug: Bool = false) -> Logger {
    var logger = Logger(label: "bench") { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = debug ? .debug : .error
    return logger
}

func report(_ name: String, received: Int, seconds: Double, cpuSeconds: Double) {
    let rate = Double(received) / max(seconds, 1e-9)
    let cpuPerRecord = cpuSeconds / Double(max(received, 1)) * 1e6
    print("\(name): \(received) records in \(format(seconds)) s = \(Int(rate)) records/s, CPU \(format(cpuSeconds)) s = \(format(cpuPerRecord)) µs/record")
}

func format(_ value: Double) -> String { String(format: "%.3f", value) }

func processCPUSeconds() -> Double { cpuSeconds(RUSAGE_SELF.rawValue) }
func childrenCPUSeconds() -> Double { cpuSeconds(RUSAGE_CHILDREN.rawValue) }

private func cpuSeconds(_ who: Int32) -> Double {
    var usage = rusage()
    getrusage(who, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

