import APNsClient
import Foundation
import Logging
import Metrics
import Relay
import ServiceLifecycle
import ServiceSupport

/// Notices a new signing key in a token credential's files (Kubernetes updates a mounted Secret in place)
/// and hands it to the credential's signer, which switches at the start of the next token epoch: replicas
/// that notice within the same epoch switch at the same instant, so the fleet keeps presenting one token.
///
/// The key and its id change together: a rotated key comes with its own key id, so a credential whose key
/// rotates names its key id in a file beside the key (`token.keyIdFile`). Files are read every
/// `apns.keyReloadIntervalMs`; a key that cannot be used is logged once, counted, and the current key
/// stays.
package struct SigningKeyWatcher: Service, CustomStringConvertible {
    /// One token credential's files and what they held when last read.
    package struct Watched: Sendable, CustomStringConvertible {
        package let credential: String
        package let prefix: String
        package let signer: ProviderTokenSigner
        package let keyFile: String
        package let keyID: RelayAppConfiguration.APNs.KeyID
        /// What the last read found (used or refused): a change is acted on, and a failure said, once.
        var seen: Seen?
        let rotated: Counter
        let refused: Counter

        package init(credential: String, prefix: String, signer: ProviderTokenSigner, keyFile: String, keyID: RelayAppConfiguration.APNs.KeyID) {
            self.credential = credential
            self.prefix = prefix
            self.signer = signer
            self.keyFile = keyFile
            self.keyID = keyID
            rotated = Counter(label: "apns_relay_signing_key_reloads_total", dimensions: [("credential", credential), ("result", "rotated")])
            refused = Counter(label: "apns_relay_signing_key_reloads_total", dimensions: [("credential", credential), ("result", "refused")])
            seen = (try? Self.read(keyFile: keyFile, keyID: keyID, prefix: prefix)).flatMap { $0 }.map(Seen.contents)
        }

        enum Seen: Equatable {
            case contents(Contents)
            /// The files could not be read, for this reason.
            case unreadable(String)
        }

        /// What the files held. Its description never shows the key (ServiceLifecycle logs each service's
        /// description at start, and a default one printed the PEM this holds).
        struct Contents: Equatable, CustomStringConvertible {
            var pem: String
            var keyID: String
            var description: String { "Contents(keyID: \(keyID), pem: <redacted>)" }
        }

        package var description: String {
            "Watched(credential: \(credential), keyFile: \(keyFile), keyID: \(keyID), signer: \(signer))"
        }

        /// Reads the key and its id twice and keeps them only when both reads agree, so a read that straddles
        /// the Secret's update never pairs the old key with the new id.
        static func read(keyFile: String, keyID: RelayAppConfiguration.APNs.KeyID, prefix: String) throws -> Contents? {
            func once() throws -> Contents {
                Contents(pem: try String(contentsOfFile: keyFile, encoding: .utf8), keyID: try RelayApp.keyID(keyID, prefix: prefix))
            }
            let first = try once()
            return try once() == first ? first : nil
        }
    }

    package enum Outcome: Equatable, Sendable {
        case unchanged
        /// The signer takes the new key at `from` (UNIX seconds).
        case rotated(fromKeyID: String, toKeyID: String, from: Int64)
        case refused(String)
    }

    private let watched: [Watched]
    private let interval: Duration
    private let clock: WallClock
    private let logger: Logger

    package var description: String {
        "SigningKeyWatcher(every \(interval): \(watched.map(\.description).joined(separator: ", ")))"
    }

    package init(watching watched: [Watched], interval: Duration, clock: WallClock = .system, logger: Logger) {
        self.watched = watched
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    package func run() async throws {
        var watched = self.watched
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            for index in watched.indices { _ = Self.check(&watched[index], now: clock.nowSeconds(), logger: logger) }
        }
    }

    /// Reads one credential's files and acts on a change.
    package static func check(_ watched: inout Watched, now: Int64, logger: Logger) -> Outcome {
        let contents: Watched.Contents
        do {
            // A read that straddled an update is tried again next time.
            guard let read = try Watched.read(keyFile: watched.keyFile, keyID: watched.keyID, prefix: watched.prefix) else { return .unchanged }
            contents = read
        } catch {
            // Kubernetes swaps a Secret's files atomically; a file that is missing is an operator's change in
            // progress or a mistake: keep the current key, say it once.
            // A missing key id file comes as a RelayError naming it; a missing key file as Foundation's error.
            let reason = (error as? RelayError)?.description ?? error.localizedDescription
            let message = "cannot read the APNs signing key of credential '\(watched.credential)' ('\(watched.keyFile)', \(watched.prefix)token.privateKeyFile): \(reason); still signing with key id \(watched.signer.keyID)"
            let unreadable = Watched.Seen.unreadable(reason)
            guard watched.seen != unreadable else { return .unchanged }
            watched.seen = unreadable
            watched.refused.increment()
            logger.error("\(message)")
            return .refused(message)
        }
        guard watched.seen != .contents(contents) else { return .unchanged }
        watched.seen = .contents(contents)
        let previous = watched.signer.keyID
        do {
            let from = try watched.signer.rotate(toPEM: contents.pem, keyID: contents.keyID, now: now)
            // Logged before it is counted: whoever sees the count can find the line.
            logger.notice("APNs signing key of credential '\(watched.credential)' changed; tokens are signed with it from the next token epoch", metadata: [
                "keyId.from": "\(previous)", "keyId.to": "\(contents.keyID)",
                "from": "\(Date(timeIntervalSince1970: TimeInterval(from)).formatted(.iso8601))",
            ])
            watched.rotated.increment()
            return .rotated(fromKeyID: previous, toKeyID: contents.keyID, from: from)
        } catch {
            let message = "the APNs signing key of credential '\(watched.credential)' changed ('\(watched.keyFile)', \(watched.prefix)token.privateKeyFile, key id \(contents.keyID)) but cannot be used: \(error.message); still signing with key id \(previous)"
            watched.refused.increment()
            logger.error("\(message)")
            return .refused(message)
        }
    }
}
