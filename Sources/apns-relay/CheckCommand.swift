import APNsClient
import APNsCore
import ArgumentParser
import Foundation
import Kafka
import Logging
import Relay
import RelayApp
import struct ServiceSupport.MonotonicInstant

/// `apns-relay check`: everything `run` needs, tried without running — the configuration, Kafka (metadata,
/// the topics, the group) and one APNs request per credential and environment that APNs refuses for a
/// harmless reason (an all-zero device token), proving TLS and the provider token or certificate.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the configuration, Kafka and APNs without running the relay or notifying anyone.",
        discussion: """
            Prints the effective configuration (secrets redacted) with where each value came from, then one \
            line per check. APNs is sent a background push to an all-zero device token, which it refuses with \
            BadDeviceToken once TLS and the credential are accepted; nothing reaches a device. The consumer \
            group is only described, never joined (joining would rebalance the running relays).
            Exit status: 0 every check passed, 1 a problem was found (one line each, starting with ✗).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "Bundle id to send the APNs check with, for credentials whose topics are empty or wildcards.")
    var topic: String?

    @Option(help: "Which APNs environments to check: production, development or both.")
    var environment = "both"

    @Flag(help: "Skip the Kafka checks.")
    var skipKafka = false

    @Flag(help: "Skip the APNs checks.")
    var skipApns = false

    @Flag(help: "Also check broadcast channel management: list the bundle's channels on each environment's management host (apns.<environment>.managementHost).")
    var channels = false

    @Option(help: "Deadline of each network check, in milliseconds.")
    var timeoutMs = 10_000

    func run() async throws {
        // It becomes the check push's apns-topic header: CR, LF or anything but a bundle id's characters would
        // change the request.
        if let topic, !APNsNotification.isBundleID(topic) {
            throw ValidationError("--topic must be a bundle id (segments of A-Z a-z 0-9 - separated by single dots), not '\(topic.debugDescription.dropFirst().dropLast())'")
        }
        let environments: [APNsEnvironment]
        switch environment {
        case "both": environments = [.production, .development]
        default:
            guard let one = APNsEnvironment(rawValue: environment) else { throw ValidationError("--environment must be production, development or both") }
            environments = [one]
        }
        var problems: [String] = []
        var passed = 0
        func fail(_ line: String) { problems.append(line); print("✗ " + line) }
        func pass(_ line: String) { passed += 1; print("✓ " + line) }

        // 1. The configuration.
        let sources: ConfigurationSources
        let configuration: RelayAppConfiguration
        do {
            sources = try await options.sources()
            configuration = try RelayAppConfiguration(reader: sources)
        } catch let error as ConfigurationError {
            for problem in error.problems { fail("configuration: \(problem)") }
            throw ExitCode(1)
        } catch {
            fail("configuration: \(error)")
            throw ExitCode(1)
        }
        print("configuration (effective values, secrets redacted):")
        let listing = configuration.effectiveSettings(from: sources)
        let width = min(44, listing.map(\.key.count).max() ?? 0)
        for setting in listing {
            print("  " + setting.key.padding(toLength: width, withPad: " ", startingAt: 0) + " = " + setting.value + "   (" + setting.source + ")")
        }
        pass("configuration: \(listing.count) keys read, no problem")
        var warnings = 0
        for notice in configuration.notices {
            warnings += 1
            print("! configuration: " + notice)
        }
        print("APNs credentials, in the order they are matched (an event goes to the first that covers its topic in its environment):")
        for credential in configuration.apns.credentials {
            let topics = credential.topics.isEmpty ? "every topic" : credential.topics.joined(separator: ", ")
            let environments = APNsEnvironment.allCases.filter(credential.environments.contains).map(\.rawValue).joined(separator: " and ")
            print("  \(credential.name): \(topics) in \(environments)")
        }

        var quiet = Logger(label: "apns-relay.check")
        quiet.logLevel = .critical
        let logger = quiet

        // 2. Kafka.
        if !skipKafka {
            let kafka = configuration.kafka
            let topics = configuration.relay.topics
            let wanted = topics.inputs + topics.outputs
            // With the secrets of kafka.sasl.* and kafka.tls.* read from their files, as `run` reads them.
            let connection: [String: String]
            do {
                connection = try RelayApp.connectionProperties(kafka)
            } catch {
                fail("Kafka: \(error)")
                connection = [:]
            }
            let properties = connection.merging(kafka.consumerProperties) { $1 }
            let timeout = Duration.milliseconds(timeoutMs)
            let inspected: Result<KafkaClusterInspection, KafkaError>
            do {
                inspected = .success(try await KafkaClusterInspection.inspect(
                    bootstrapServers: kafka.bootstrapServers, topics: wanted, groupID: kafka.groupID,
                    properties: properties, timeout: timeout, logger: logger))
            } catch {
                inspected = .failure(error)
            }
            switch inspected {
            case .failure(let error):
                let refused = error.refusesCredentials ? "the brokers refused the relay's credentials: " : ""
                fail("Kafka: \(refused)\(error) (kafka.bootstrapServers: \(kafka.bootstrapServers.joined(separator: ",")); connecting with \(kafka.security.summary); check \(kafka.security.keysToCheck))")
            case .success(let cluster):
                pass("Kafka: \(cluster.brokers.count) broker(s) answered: \(cluster.brokers.joined(separator: ", "))")
                for topic in wanted {
                    let key = topics.input.contains(topic) ? "kafka.topics.input"
                        : topics.urgent.contains(topic) ? "kafka.topics.urgent"
                        : topic == topics.results ? "kafka.topics.results"
                        : topic == topics.removedTokens ? "kafka.topics.removedTokens"
                        : topic == topics.removedChannels ? "kafka.topics.removedChannels" : "kafka.topics.deadLetters"
                    if let partitions = cluster.partitions[topic] {
                        pass("Kafka topic \(topic) (\(key)): \(partitions) partition(s)")
                    } else {
                        fail("Kafka topic \(topic) (\(key)) is missing: \(cluster.missingTopics[topic] ?? "not in the metadata")")
                    }
                }
                warnings += await checkTopicSettings(
                    configuration, cluster: cluster, properties: properties, timeout: timeout, logger: logger, pass: pass, fail: fail)
                // The group's coordinator is asked for its committed offsets (as a starting member would be),
                // without joining: that proves the group can be coordinated and says where the relay starts.
                let inputPartitions = topics.inputs.flatMap { topic in
                    (0..<(cluster.partitions[topic] ?? 0)).map { KafkaTopicPartition(topic: topic, partition: Int32($0)) }
                }
                var consumerConfiguration = KafkaConsumerConfiguration(bootstrapServers: kafka.bootstrapServers, groupID: kafka.groupID)
                consumerConfiguration.additionalProperties = properties
                do {
                    let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
                    let committed = try await consumer.committedOffsets(for: inputPartitions, timeout: timeout)
                    let withOffset = committed.values.filter { $0 != nil }.count
                    var line = "Kafka consumer group \(kafka.groupID) (kafka.groupId): coordinator answers; \(withOffset) of \(inputPartitions.count) input partition(s) have a committed offset"
                    if let state = cluster.groupState {
                        line += "; state \(state)" + (state == "Dead" ? "" : ", \(cluster.groupMembers) member(s)")
                    }
                    pass(line)
                } catch {
                    fail("Kafka consumer group \(kafka.groupID) (kafka.groupId): its coordinator did not answer: \(error)")
                }
                if let exactlyOnce = configuration.relay.exactlyOnce {
                    await checkTransactions(exactlyOnce, configuration: configuration, timeout: timeout, logger: logger, pass: pass, fail: fail)
                }
            }
        }

        // 3. APNs: one refused request per credential and environment.
        if !skipApns, let eventLoops = apnsEventLoops(configuration, fail: fail) {
            try await eventLoops.withRunningLoops {
                for credential in configuration.apns.credentials {
                    // The key or certificate is read and checked whether or not there is a bundle id to send with.
                    let client: APNsClient
                    do {
                        client = try RelayApp.client(configuration.apns, credential: credential, eventLoops: eventLoops, logger: logger)
                    } catch {
                        fail("APNs credential \(credential.name): \(error)")
                        continue
                    }
                    let (line, notices) = Self.describe(credential, client)
                    pass(line)
                    for notice in notices + RelayApp.keyFileNotices(credential) {
                        warnings += 1
                        print("! " + notice)
                    }
                    let concrete = credential.topics.first { !$0.hasSuffix(".*") }
                    guard let bundle = topic ?? concrete ?? client.clientCertificate?.bundleID else {
                        fail("APNs credential \(credential.name): no bundle id to check it with at APNs (its topics are empty or wildcards); give --topic")
                        await client.shutdown(deadline: MonotonicInstant.now.advanced(by: .seconds(2)))
                        continue
                    }
                    for environment in environments {
                        let endpoint = configuration.apns.endpoints[environment].map { "\($0.host):\($0.port)" } ?? "?"
                        let label = "APNs \(environment.rawValue) \(endpoint), credential \(credential.name), topic \(bundle)"
                        guard credential.environments.contains(environment) else {
                            print("- \(label): not checked, the credential is for \(credential.environments.map(\.rawValue).sorted().joined(separator: ", ")) only (\(credential.keyPrefix)environments)")
                            continue
                        }
                        let outcome = await probe(client, bundle: bundle, environment: environment)
                        switch outcome {
                        case .success(let response):
                            switch (response.status, response.reason) {
                            case (200, _):
                                pass("\(label): accepted (status 200; a real APNs refuses the all-zero token, this endpoint did not)")
                            case (400, .badDeviceToken?), (400, .deviceTokenNotForTopic?), (410, _):
                                pass("\(label): TLS and credential accepted (APNs refused the all-zero device token: \(response.reason?.rawValue ?? String(response.status)))")
                            case (403, let reason?) where reason == .badEnvironmentKeyInToken || reason == .badEnvironmentKeyIdInToken:
                                fail("\(label): the credential was refused: 403 \(reason) — its signing key is restricted to the other environment in Apple's developer account: set \(credential.keyPrefix)environments to the environment the key is for, and give \(environment.rawValue) a credential of its own")
                            case (403, let reason):
                                fail("\(label): the credential was refused: 403 \(reason?.rawValue ?? "") — check the key id, team id and key (or certificate) and that the topic belongs to the team")
                            case (let status, let reason):
                                fail("\(label): unexpected answer \(status) \(reason?.rawValue ?? "")")
                            }
                        case .failure(let error):
                            fail("\(label): no answer: \(error.message)")
                        }
                    }
                    await client.shutdown(deadline: MonotonicInstant.now.advanced(by: .seconds(2)))
                    if channels {
                        for (ok, line) in await checkChannelManagement(
                            configuration, credential: credential, bundle: bundle, environments: environments.filter(credential.environments.contains),
                            eventLoops: eventLoops, logger: logger)
                        {
                            if ok { pass(line) } else { fail(line) }
                        }
                    }
                }
            }
        }

        let warned = warnings == 0 ? "" : ", \(warnings) warning(s) (!)"
        print(problems.isEmpty ? "OK: \(passed) checks passed\(warned)" : "\(problems.count) problem(s), \(passed) checks passed\(warned)")
        if !problems.isEmpty { throw ExitCode(1) }
    }

    /// The APNs event loops the checks' clients run on, or `nil` (and a failed check) when they cannot be set up.
    private func apnsEventLoops(_ configuration: RelayAppConfiguration, fail: (String) -> Void) -> APNsEventLoopGroup? {
        do {
            return try RelayApp.eventLoops(configuration.apns)
        } catch {
            fail("\(error)")
            return nil
        }
    }

    /// What `check` says of a credential whose key or certificate loaded, and its warnings (an expiry within
    /// 30 days, a certificate for a bundle id the credential's topics do not cover).
    static func describe(_ credential: RelayAppConfiguration.APNs.Credential, _ client: APNsClient) -> (String, [String]) {
        let name = "APNs credential \(credential.name)"
        switch credential.auth {
        case .token(_, let teamID, let keyFile, _):
            let keyID = if case .token(let signer) = client.configuration.credential { signer.keyID } else { "?" }
            return ("\(name): signing key '\(keyFile)' read (EC P-256, key id \(keyID), team \(teamID))", [])
        case .certificate:
            guard let certificate = client.clientCertificate else { return ("\(name): client certificate read", []) }
            let subject = certificate.bundleID ?? certificate.commonName ?? "no subject UID"
            let now = Int64(Date().timeIntervalSince1970)
            let days = (certificate.notAfter - now) / 86_400
            var notices = CertificateExpiryWatcher.notices(
                [.init(what: "\(name): the client certificate", notAfter: certificate.notAfter)], now: now).map(\.1)
            if let bundle = certificate.bundleID, !credential.topics.isEmpty,
               !credential.topics.contains(where: { CredentialDirectory.Credential.matches(bundle, $0) })
            {
                notices.append("\(name): the client certificate is for \(bundle), which \(credential.keyPrefix)topics (\(credential.topics.joined(separator: ", "))) does not cover: APNs refuses it for those topics")
            }
            return ("\(name): client certificate for \(subject), valid \(CertificateDetails.date(certificate.notBefore)) to "
                + "\(CertificateDetails.date(certificate.notAfter)) (\(days) days left), private key matches", notices)
        }
    }

    /// `--channels`: a read-only list of the bundle's channels per environment (TLS, credential, the
    /// management host, and that broadcast is enabled for the bundle). One (passed, line) per check.
    /// `kafka.exactlyOnce`: asks the transaction coordinator to register a producer (InitProducerId), as `run`
    /// does at start. Under an id of its own beside the relay's: registering the relay's id would fence a
    /// relay running with it. (Where ACLs name transactional ids, a prefix covering both passes; one naming
    /// only the relay's id fails here though `run` would pass.)
    private func checkTransactions(
        _ exactlyOnce: RelayConfiguration.ExactlyOnce, configuration: RelayAppConfiguration, timeout: Duration,
        logger: Logger, pass: (String) -> Void, fail: (String) -> Void
    ) async {
        let probeID = exactlyOnce.transactionalID + ".check"
        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: configuration.kafka.bootstrapServers)
        producerConfiguration.clientID = configuration.kafka.clientID
        producerConfiguration.additionalProperties = ((try? RelayApp.connectionProperties(configuration.kafka)) ?? [:]).merging(configuration.kafka.producerProperties) { $1 }
        producerConfiguration.transactionalID = probeID
        producerConfiguration.transactionTimeout = exactlyOnce.transactionTimeout
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
            try producer.start()
        } catch {
            return fail("Kafka transactions (kafka.exactlyOnce): \(error)")
        }
        do {
            try await producer.initTransactions(timeout: timeout)
            pass("Kafka transactions (kafka.exactlyOnce): the transaction coordinator registers producers (probed as \(probeID), beside kafka.transactionalId \(exactlyOnce.transactionalID), so as not to fence a relay running with it)")
        } catch {
            fail("Kafka transactions (kafka.exactlyOnce): the broker refused to register transactional id \(probeID) (InitProducerId): \(error). Transactions need Kafka ≥ 2.5 with its transaction state log, and permission to write the transactional id (kafka.transactionalId \(exactlyOnce.transactionalID) and this probe's)")
        }
        try? await producer.close(timeout: timeout)
    }

    private func checkChannelManagement(
        _ configuration: RelayAppConfiguration, credential: RelayAppConfiguration.APNs.Credential, bundle: String,
        environments: [APNsEnvironment], eventLoops: APNsEventLoopGroup, logger: Logger
    ) async -> [(Bool, String)] {
        let manager: ChannelManager
        do {
            manager = try RelayApp.channelManager(
                configuration.apns, credential: credential, timeout: .milliseconds(timeoutMs), eventLoops: eventLoops, logger: logger)
        } catch {
            return [(false, "APNs channel management, credential \(credential.name): \(error)")]
        }
        var lines: [(Bool, String)] = []
        for environment in environments {
            let endpoint = configuration.apns.managementEndpoints[environment].map { "\($0.host):\($0.port)" } ?? "?"
            let label = "APNs channel management \(environment.rawValue) \(endpoint), credential \(credential.name), bundle \(bundle)"
            do {
                let ids = try await manager.list(bundleID: bundle, environment: environment)
                lines.append((true, "\(label): \(ids.count) channel(s)"))
            } catch let error as ChannelManagementError where error.reason == .featureNotEnabled {
                lines.append((false, "\(label): broadcast is not enabled for this bundle id (FeatureNotEnabled): enable it for the app in Apple's developer account"))
            } catch let error as ChannelManagementError {
                lines.append((false, "\(label): \(error)"))
            } catch let error as APNsClientError {
                lines.append((false, "\(label): no answer: \(error.message)"))
            } catch {
                lines.append((false, "\(label): \(error)"))
            }
        }
        await manager.shutdown()
        return lines
    }

    /// A background push to the all-zero device token: APNs checks TLS and the credential, then refuses the token.
    private func probe(_ client: APNsClient, bundle: String, environment: APNsEnvironment) async -> Result<APNsResponse, APNsClientError> {
        let notification = APNsNotification(
            deviceToken: try! DeviceToken(hex: String(repeating: "0", count: 64)), topic: bundle, pushType: .background,
            priority: .powerConsiderate, expiration: 0, environment: environment,
            payload: ArraySlice(#"{"aps":{"content-available":1}}"#.utf8)
        )
        return await withCheckedContinuation { continuation in
            client.send(notification, deadline: MonotonicInstant.now.advanced(by: .milliseconds(timeoutMs))) { continuation.resume(returning: $0) }
        }
    }
}
