import APNsClient
import Logging
import Metrics
import ServiceLifecycle
import ServiceSupport

/// Watches the expiry of the APNs client certificates and of the CA file (`apns.caFile`): a yearly APNs
/// certificate that lapses is a classic push outage, and nothing else would say so before it happens.
///
/// Each expiry is a gauge (`apns_client_certificate_expiry_timestamp_seconds{credential}`,
/// `apns_client_ca_certificate_expiry_timestamp_seconds`) for alerting, and a log line at start and every
/// `interval`: a warning from 30 days before, an error from 7 days. An expired client certificate is refused
/// at start (`APNsClient`); one that expires while the relay runs is logged at error level.
package struct CertificateExpiryWatcher: Service, CustomStringConvertible {
    package struct Watched: Sendable, Equatable {
        /// What expires, for the log: "the client certificate of credential 'beta' (com.beta.app)".
        package var what: String
        /// Seconds since the epoch.
        package var notAfter: Int64

        package init(what: String, notAfter: Int64) {
            self.what = what
            self.notAfter = notAfter
        }
    }

    package static let warningWindow: Int64 = 30 * 86_400
    package static let errorWindow: Int64 = 7 * 86_400

    let watched: [Watched]
    let interval: Duration
    let clock: WallClock
    let logger: Logger
    package var description: String { "CertificateExpiryWatcher(\(watched.count))" }

    /// The certificates of `clients` (one per credential, in configuration order) and of `caFile`, with
    /// their gauges set; `nil` when there is none.
    package init?(clients: [(credential: String, client: APNsClient)], caFile: String?, interval: Duration = .seconds(6 * 3600),
                  clock: WallClock = .system, logger: Logger) {
        var watched: [Watched] = []
        for (credential, client) in clients {
            guard let certificate = client.clientCertificate else { continue }
            let subject = certificate.bundleID ?? certificate.commonName
            watched.append(Watched(
                what: "the client certificate of credential '\(credential)'" + (subject.map { " (\($0))" } ?? ""), notAfter: certificate.notAfter))
            Gauge(label: "apns_client_certificate_expiry_timestamp_seconds", dimensions: [("credential", credential)])
                .record(certificate.notAfter)
        }
        // Every client reads the same CA file: its earliest expiry, once.
        if let caFile, let earliest = clients.first?.client.caCertificates.min(by: { $0.notAfter < $1.notAfter }) {
            watched.append(Watched(what: "a certificate of the CA file '\(caFile)' (apns.caFile)", notAfter: earliest.notAfter))
            Gauge(label: "apns_client_ca_certificate_expiry_timestamp_seconds").record(earliest.notAfter)
        }
        guard !watched.isEmpty else { return nil }
        self.watched = watched
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    package func run() async throws {
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            for (level, message) in Self.notices(watched, now: clock.nowSeconds()) { logger.log(level: level, "\(message)") }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }

    /// What to log about `watched` at `now`: nothing beyond 30 days.
    package static func notices(_ watched: [Watched], now: Int64) -> [(Logger.Level, String)] {
        watched.compactMap { item in
            let left = item.notAfter - now
            let date = CertificateDetails.date(item.notAfter)
            if left <= 0 {
                return (.error, "\(item.what) expired on \(date): APNs refuses it; replace it and restart the relay")
            }
            let days = left / 86_400
            let when = days == 0 ? "today" : "in \(days) day\(days == 1 ? "" : "s")"
            if left <= errorWindow { return (.error, "\(item.what) expires on \(date), \(when): renew it now") }
            if left <= warningWindow { return (.warning, "\(item.what) expires on \(date), \(when): renew it before then") }
            return nil
        }
    }
}
