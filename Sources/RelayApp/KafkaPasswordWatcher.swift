import Foundation
import Kafka
import Logging
import Metrics
import ServiceLifecycle

/// Notices a new SASL password in `kafka.sasl.passwordFile` (Kubernetes updates a mounted Secret in place)
/// and hands it to the Kafka clients, which present it on their next connections: a rotated password
/// takes effect without a restart, as long as the broker accepts both while the Secret propagates.
///
/// The file is read every `kafka.sasl.reloadIntervalMs`; an unreadable or empty file is logged once and
/// counted, and the current password stays.
package struct KafkaPasswordWatcher: Service, CustomStringConvertible {
    /// Whoever holds a librdkafka handle that presents the password.
    package typealias Client = @Sendable (_ username: String, _ password: String) throws -> Void

    package enum Outcome: Equatable, Sendable {
        case unchanged
        case rotated
        case refused(String)
    }

    /// What the watcher knows between reads.
    package struct State: Sendable {
        /// The password in use; its text is never printed.
        var password: String
        /// The last failure said, so that it is said once.
        var failure: String?

        package init(password: String) { self.password = password }
    }

    private let username: String
    private let passwordFile: String
    private let clients: [Client]
    private let interval: Duration
    private let logger: Logger
    private let initial: String
    private let rotated = Counter(label: "apns_relay_kafka_password_reloads_total", dimensions: [("result", "rotated")])
    private let refused = Counter(label: "apns_relay_kafka_password_reloads_total", dimensions: [("result", "refused")])

    package var description: String {
        "KafkaPasswordWatcher(user: \(username), passwordFile: \(passwordFile), every \(interval))"
    }

    /// - Parameter password: the password the clients were made with.
    package init(username: String, passwordFile: String, password: String, clients: [Client], interval: Duration, logger: Logger) {
        self.username = username
        self.passwordFile = passwordFile
        self.initial = password
        self.clients = clients
        self.interval = interval
        self.logger = logger
    }

    package func run() async throws {
        var state = State(password: initial)
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            _ = check(&state)
        }
    }

    /// Reads the file once and acts on a change.
    package func check(_ state: inout State) -> Outcome {
        let password: String
        do {
            password = try RelayAppConfiguration.KafkaSecurity.secret(passwordFile, key: "kafka.sasl.passwordFile")
        } catch {
            let message = "\(error); the Kafka clients keep the password they have"
            guard state.failure != message else { return .unchanged }
            state.failure = message
            refused.increment()
            logger.error("\(message)")
            return .refused(message)
        }
        state.failure = nil
        guard password != state.password else { return .unchanged }
        do {
            for client in clients { try client(username, password) }
        } catch {
            let message = "the Kafka SASL password in '\(passwordFile)' (kafka.sasl.passwordFile) changed but librdkafka refused it: \(error)"
            state.failure = message
            refused.increment()
            logger.error("\(message)")
            return .refused(message)
        }
        state.password = password
        // Logged before it is counted: whoever sees the count can find the line.
        logger.notice("Kafka SASL password changed in '\(passwordFile)' (kafka.sasl.passwordFile); the Kafka clients present it on their next connections", metadata: ["user": "\(username)"])
        rotated.increment()
        return .rotated
    }
}
