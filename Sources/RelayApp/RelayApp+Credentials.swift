import APNsClient
import APNsCore
import Foundation
import Logging
import Relay

/// Loading the credentials: every failure names the file and the configuration key that points at it.
extension RelayApp {
    /// The event loops every APNs client of the process runs on (`apns.ioThreads`, `apns.batchWindowMs`);
    /// their threads start when the group runs (a service, or `withRunningLoops`).
    /// - Throws: `RelayError` when the kernel refuses an epoll set, an eventfd or a timerfd.
    package static func eventLoops(_ apns: RelayAppConfiguration.APNs) throws -> APNsEventLoopGroup {
        do {
            return try APNsEventLoopGroup(loops: apns.ioThreads, batchWindow: apns.batchWindow)
        } catch {
            throw RelayError("cannot set up the APNs event loops (apns.ioThreads \(apns.ioThreads)): \(error.message)")
        }
    }

    /// An APNs client for `credential`, its key or certificate and the CA file loaded (nothing connects yet).
    /// - Throws: `RelayError` naming the file and its key.
    package static func client(
        _ apns: RelayAppConfiguration.APNs, credential: RelayAppConfiguration.APNs.Credential, eventLoops: APNsEventLoopGroup, logger: Logger
    ) throws -> APNsClient {
        try make(apns, credential: credential, logger: logger) { configuration throws(APNsClientError) in
            try APNsClient(configuration: configuration, eventLoops: eventLoops, logger: logger)
        }
    }

    /// A channel manager for `credential` (broadcast channels, on the management hosts).
    /// - Throws: `RelayError` naming the file and its key.
    package static func channelManager(
        _ apns: RelayAppConfiguration.APNs, credential: RelayAppConfiguration.APNs.Credential, timeout: Duration,
        eventLoops: APNsEventLoopGroup, logger: Logger
    ) throws -> ChannelManager {
        try make(apns, credential: credential, logger: logger) { configuration throws(APNsClientError) in
            try ChannelManager(configuration: configuration, eventLoops: eventLoops, timeout: timeout, logger: logger)
        }
    }

    private static func make<Client>(
        _ apns: RelayAppConfiguration.APNs, credential: RelayAppConfiguration.APNs.Credential, logger: Logger,
        _ build: (APNsClientConfiguration) throws(APNsClientError) -> Client
    ) throws -> Client {
        let configuration = try clientConfiguration(apns, credential: credential, logger: logger)
        if let caFile = apns.caFile, !apns.insecureSkipVerify, !FileManager.default.isReadableFile(atPath: caFile) {
            throw RelayError("the CA file '\(caFile)' (apns.caFile) does not exist or cannot be read")
        }
        do {
            return try build(configuration)
        } catch where error.code == .tls && apns.caFile != nil && !apns.insecureSkipVerify {
            throw RelayError("cannot load the CA file '\(apns.caFile!)' (apns.caFile): \(error)")
        } catch where error.code == .invalidCredential {
            throw RelayError("cannot load the client certificate of APNs credential '\(credential.name)' (\(credential.keyPrefix)certificate.*): \(error.message)")
        } catch {
            throw RelayError("cannot set up the APNs client of credential '\(credential.name)': \(error)")
        }
    }

    /// The APNs client's configuration; reads the key or certificate files.
    /// - Throws: `RelayError` naming the file and its key.
    package static func clientConfiguration(
        _ apns: RelayAppConfiguration.APNs, credential configured: RelayAppConfiguration.APNs.Credential, logger: Logger
    ) throws -> APNsClientConfiguration {
        let prefix = configured.keyPrefix
        let credential: APNsClientConfiguration.Credential
        switch configured.auth {
        case .token(let keyIDSource, let teamID, let keyFile, let epoch):
            let pem: String
            do {
                pem = try String(contentsOfFile: keyFile, encoding: .utf8)
            } catch {
                throw RelayError("cannot read the APNs signing key file '\(keyFile)' (\(prefix)token.privateKeyFile): \(error.localizedDescription)")
            }
            let keyID = try Self.keyID(keyIDSource, prefix: prefix)
            do {
                credential = .token(try ProviderTokenSigner(pem: pem, keyID: keyID, teamID: teamID, rotationEpoch: epoch))
            } catch {
                let reason = error.message
                throw RelayError("cannot parse the APNs signing key '\(keyFile)' (\(prefix)token.privateKeyFile, key id \(keyID)): \(reason)")
            }
        case .certificate(.pem(let certificateFile, let privateKeyFile)):
            for (file, key) in [(certificateFile, "certificate.certificateFile"), (privateKeyFile, "certificate.privateKeyFile")]
            where !FileManager.default.isReadableFile(atPath: file) {
                throw RelayError("the APNs certificate file '\(file)' (\(prefix)\(key)) does not exist or cannot be read")
            }
            credential = .certificate(.pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile))
        case .certificate(.pkcs12(let file, let passphraseFile)):
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw RelayError("the APNs PKCS#12 file '\(file)' (\(prefix)certificate.pkcs12File) does not exist or cannot be read")
            }
            var passphrase = ""
            if let passphraseFile {
                do {
                    passphrase = try String(contentsOfFile: passphraseFile, encoding: .utf8).trimmingCharacters(in: .newlines)
                } catch {
                    throw RelayError("cannot read the certificate passphrase file '\(passphraseFile)' (\(prefix)certificate.passphraseFile)")
                }
            }
            credential = .certificate(.pkcs12(file: file, passphrase: passphrase))
        }
        for notice in keyFileNotices(configured) { logger.warning("\(notice)") }
        let trust: ServerTrust
        if apns.insecureSkipVerify {
            logger.critical("APNs server certificate verification is OFF (apns.insecureSkipVerify); never do this in production")
            trust = .insecureNoVerification
        } else if let caFile = apns.caFile {
            trust = .caFile(caFile)
        } else {
            trust = .systemTrustStore
        }
        var client = APNsClientConfiguration(credential: credential, trust: trust)
        client.proxy = try proxy(apns)
        client.name = configured.name
        client.endpoints = apns.endpoints
        client.managementEndpoints = apns.managementEndpoints
        client.pool.minConnections = apns.minConnections
        client.pool.maxConnections = apns.maxConnections
        client.pool.idleTimeout = apns.idleTimeout
        client.connection.connectTimeout = apns.connectTimeout
        client.pool.adaptiveConcurrency = apns.adaptiveConcurrency
        client.pool.congestionLatency = apns.congestionLatency
        client.pool.urgentShare = apns.urgentShare
        return client
    }

    /// The proxy with its credentials read from their file.
    /// - Throws: `RelayError` naming the file and its key.
    private static func proxy(_ apns: RelayAppConfiguration.APNs) throws -> HTTPProxy? {
        guard var proxy = apns.proxy else { return nil }
        guard let file = apns.proxyCredentialsFile else { return proxy }
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw RelayError("cannot read the proxy credentials file '\(file)' (apns.proxy.credentialsFile): \(error.localizedDescription)")
        }
        do {
            proxy.credentials = try HTTPProxy.Credentials(parsing: text)
        } catch {
            throw RelayError("the proxy credentials file '\(file)' (apns.proxy.credentialsFile): \(error.message)")
        }
        return proxy
    }

    /// The key id, read from its file if it is in one (trimmed).
    /// - Throws: `RelayError` naming the file and its key.
    package static func keyID(_ source: RelayAppConfiguration.APNs.KeyID, prefix: String) throws -> String {
        switch source {
        case .value(let keyID):
            return keyID
        case .file(let file):
            guard let data = FileManager.default.contents(atPath: file) else {
                throw RelayError("cannot read the APNs key id file '\(file)' (\(prefix)token.keyIdFile): it does not exist or cannot be read")
            }
            let keyID = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if let problem = keyIDFileProblem(keyID, bytes: data.count) {
                throw RelayError("the APNs key id file '\(file)' (\(prefix)token.keyIdFile) \(problem)")
            }
            return keyID
        }
    }

    /// What is wrong with the key id read from a file, in words that never quote the file: a wrong path often
    /// points at the .p8 key itself, whose content must not reach a log.
    static func keyIDFileProblem(_ keyID: String, bytes: Int) -> String? {
        let isAppleID = keyID.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
        if keyID.unicodeScalars.count == 10 && isAppleID { return nil }
        var found: [String] = []
        if keyID.unicodeScalars.count != 10 {
            let characters = keyID.unicodeScalars.count
            let size = characters == bytes ? "\(bytes) bytes" : "\(bytes) bytes (\(characters) characters once trimmed)"
            found.append(keyID.isEmpty ? "is empty" : "is \(size), not a 10-character key id")
        }
        if keyID.unicodeScalars.contains(where: { ("a"..."z").contains($0) }) { found.append("holds lowercase letters") }
        if keyID.unicodeScalars.contains(where: { !("A"..."Z").contains($0) && !("a"..."z").contains($0) && !("0"..."9").contains($0) }) {
            found.append("holds characters other than A–Z 0–9")
        }
        if keyID.hasPrefix("-----BEGIN") { found.append("looks like a PEM file (the key itself?)") }
        return found.joined(separator: ", ") + ": an Apple Key ID is 10 characters, A–Z and 0–9"
    }

    /// Warnings for secret files (the signing key, the certificate's key, the PKCS#12 file and its passphrase
    /// file) that every user of the host can read. Not refused: Kubernetes mounts Secrets 0644 unless told
    /// otherwise, and the relay runs alone in its container there. Group-readable is left alone: `defaultMode:
    /// 0440` with the pod's `fsGroup` is how Kubernetes lets a non-root relay read its keys.
    package static func keyFileNotices(_ credential: RelayAppConfiguration.APNs.Credential) -> [String] {
        let prefix = credential.keyPrefix
        let files: [(path: String, what: String, key: String)]
        switch credential.auth {
        case .token(_, _, let keyFile, _):
            files = [(keyFile, "APNs signing key file", "token.privateKeyFile")]
        case .certificate(.pem(_, let privateKeyFile)):
            files = [(privateKeyFile, "APNs certificate's private key file", "certificate.privateKeyFile")]
        case .certificate(.pkcs12(let file, let passphraseFile)):
            files = [(file, "APNs PKCS#12 file", "certificate.pkcs12File")]
                + (passphraseFile.map { [($0, "certificate passphrase file", "certificate.passphraseFile")] } ?? [])
        }
        return files.compactMap { file in
            var status = stat()
            guard stat(file.path, &status) == 0 else { return nil }  // an unreadable file fails the start elsewhere
            let mode = status.st_mode & 0o7777
            guard mode & 0o004 != 0 else { return nil }
            return "the \(file.what) '\(file.path)' (\(prefix)\(file.key)) has mode \(String(format: "%04o", UInt32(mode))): "
                + "readable by others; 0600 or 0440 is enough (on Kubernetes, set the Secret volume's defaultMode: 0440)"
        }
    }
}
