import APNsClient
import APNsCore
import ArgumentParser
import Foundation
import Logging
import Relay
import RelayApp
import struct ServiceSupport.MonotonicInstant

/// `apns-relay send`: one push through the relay's own APNs client and configuration, to check a credential,
/// an endpoint or a device token by hand.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one push with the relay's configuration and print APNs' answer.",
        discussion: """
            The push is an event file (the same contract as the input topic) or flags. The relay's \
            configuration (--config, APNS_RELAY_* variables, --set) says which credential and endpoints to use; \
            Kafka settings are not needed. The credential is the first whose apns topics cover the event's \
            topic, as in the relay. With --channel-id (or an event with channelId) it sends a broadcast to a Live \
            Activity channel (see 'apns-relay channels'). Prints status, reason, apns-id (apns-request-id for a \
            broadcast) and the time APNs took.
            Exit status: 0 accepted (200), 1 refused by APNs, 2 a configuration or event problem, \
            3 no answer (connection or timeout), 64 wrong or missing arguments.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "A notification event (JSON) to send; '-' reads standard input.")
    var event: String?

    @Option(help: "Device token (hex), when no --event is given.")
    var deviceToken: String?

    @Option(help: "A broadcast channel id (base64) instead of a device token: sends a Live Activity broadcast.")
    var channelId: String?

    @Option(help: "Bundle id (apns-topic without the push type's suffix), when no --event is given.")
    var topic: String?

    @Option(help: "Push type (default: alert; liveactivity with --channel-id).")
    var pushType: String?

    @Option(help: "The APNs payload (JSON); default: an alert saying --alert (a Live Activity update with --channel-id).")
    var payload: String?

    @Option(help: "Alert text for the default payload.")
    var alert = "Test notification from apns-relay send"

    @Option(help: "production or development.")
    var environment = "production"

    @Option(help: "apns-priority (10, 5 or 1).")
    var priority: Int?

    @Option(help: "apns-expiration (UNIX seconds; 0: deliver now or never).")
    var expiration: Int?

    @Option(help: "apns-collapse-id.")
    var collapseId: String?

    @Option(help: "How long to wait for APNs' answer, in milliseconds.")
    var timeoutMs = 15_000

    func validate() throws {
        if deviceToken != nil && channelId != nil {
            throw ValidationError("--device-token and --channel-id are alternatives: a push goes to a device or to a channel")
        }
        if event == nil && ((deviceToken == nil && channelId == nil) || topic == nil) {
            throw ValidationError("give --event FILE, or --topic with --device-token or --channel-id")
        }
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
        if event != nil && (deviceToken != nil || channelId != nil || topic != nil) {
            throw ValidationError("--event and --device-token/--channel-id/--topic are alternatives")
        }
    }

    func run() async throws {
        let reader = try await options.sources()
        let configuration: RelayAppConfiguration
        do {
            configuration = try RelayAppConfiguration(reader: reader, requireKafka: false)
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        var logger = Logger(label: "apns-relay.send")
        logger.logLevel = .error

        let bytes: [UInt8]
        do {
            bytes = try eventBytes()
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        let decoded: NotificationEvent
        do {
            decoded = try EventDecoder(explainer: try? SchemaValidator.notificationEvent()).decode(bytes)
            try decoded.notification.validate()
        } catch {
            print("error: the event is not valid: \(error)")
            throw ExitCode(2)
        }
        let notification = decoded.notification
        guard let credential = configuration.apns.credentials.first(where: { $0.covers(notification.topic, in: notification.environment) }) else {
            print("error: no credential covers topic \(notification.topic) in \(notification.environment.rawValue) (apns.topics, apns.environments, apns.credential.NAME.topics, …environments)")
            throw ExitCode(2)
        }
        let client: APNsClient
        let eventLoops: APNsEventLoopGroup
        do {
            eventLoops = try RelayApp.eventLoops(configuration.apns)
            client = try RelayApp.client(configuration.apns, credential: credential, eventLoops: eventLoops, logger: logger)
        } catch {
            print("error: \(error)")
            throw ExitCode(2)
        }
        let endpoint = configuration.apns.endpoints[notification.environment].map { "\($0.host):\($0.port)" } ?? "?"
        print("sending \(notification.pushType.rawValue) push to \(notification.target) topic \(notification.topic), \(notification.environment.rawValue) (\(endpoint)), credential \(credential.name)")
        let start = ContinuousClock.now
        let (outcome, took) = try await eventLoops.withRunningLoops {
            let outcome: Result<APNsResponse, APNsClientError> = await withCheckedContinuation { continuation in
                client.send(notification, deadline: MonotonicInstant.now.advanced(by: .milliseconds(timeoutMs))) { continuation.resume(returning: $0) }
            }
            let took = ContinuousClock.now - start
            await client.shutdown(deadline: MonotonicInstant.now.advanced(by: .seconds(2)))
            return (outcome, took)
        }
        let milliseconds = Int(took.components.seconds * 1000 + took.components.attoseconds / 1_000_000_000_000_000)
        switch outcome {
        case .success(let response):
            var line = "status \(response.status)"
            if let reason = response.reason { line += "  reason \(reason.rawValue)" }
            if let timestamp = response.timestamp { line += "  timestamp \(timestamp)" }
            line += (notification.isBroadcast ? "  apns-request-id " : "  apns-id ") + (response.apnsID ?? "-")
            if let unique = response.apnsUniqueID { line += "  apns-unique-id \(unique)" }
            line += "  \(milliseconds) ms (connect included)"
            print(line)
            if response.status != 200 { throw ExitCode(1) }
        case .failure(let error):
            print("no answer: \(error.message) after \(milliseconds) ms")
            throw ExitCode(3)
        }
    }

    /// The event's JSON: the file, or one built from the flags (then checked like any event).
    private func eventBytes() throws -> [UInt8] {
        if let event {
            if event == "-" { return Array(FileHandle.standardInput.readDataToEndOfFile()) }
            guard let data = FileManager.default.contents(atPath: event) else {
                throw SendError("cannot read the event file '\(event)'")
            }
            return Array(data)
        }
        let now = Int(Date().timeIntervalSince1970)
        var object: [String: Any] = [
            "id": "apns-relay-send-\(now)", "topic": topic!, "environment": environment,
            "pushType": pushType ?? (channelId != nil ? "liveactivity" : "alert"),
        ]
        if let channelId { object["channelId"] = channelId } else { object["deviceToken"] = deviceToken! }
        if let payload {
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) else {
                throw SendError("--payload is not JSON: \(payload)")
            }
            object["payload"] = parsed
        } else if channelId != nil {
            object["payload"] = ["aps": ["timestamp": now, "event": "update", "content-state": ["message": alert]]]
        } else {
            object["payload"] = ["aps": ["alert": alert]]
        }
        if let priority { object["priority"] = priority }
        if let expiration { object["expiration"] = expiration }
        if let collapseId { object["collapseId"] = collapseId }
        return Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }
}

struct SendError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
