import APNsCore
import COpenSSL

/// Why the client could not get an APNs response.
///
/// Transport failures carry a `TransportFailure` so callers can map them with `DeliveryDecision(failure:)`.
package struct APNsClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Extensible error code.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case transport, invalidCredential, invalidConfiguration, signingFailed, tls, shutdown, cancelled
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        /// No response: see `transportFailure`.
        package static let transport = Code(.transport)
        package static let invalidCredential = Code(.invalidCredential)
        package static let invalidConfiguration = Code(.invalidConfiguration)
        package static let signingFailed = Code(.signingFailed)
        /// TLS set-up (context, certificates) failed locally.
        package static let tls = Code(.tls)
        /// The client is shutting down.
        package static let shutdown = Code(.shutdown)
        /// The caller cancelled the request (``RequestTicket/cancel()``); the async `send` throws
        /// `CancellationError` instead.
        package static let cancelled = Code(.cancelled)
        package var description: String { base.rawValue }
    }

    package let code: Code
    package let message: String
    /// Set when `code == .transport`.
    package let transportFailure: TransportFailure?
    /// OpenSSL's `ERR_get_error` (read in the call that failed) or an nghttp2 / errno code, when there is one.
    package let underlyingCode: Int

    init(_ code: Code, _ message: String, openSSLError: UInt = 0) {
        self.code = code
        self.transportFailure = nil
        self.underlyingCode = Int(bitPattern: openSSLError)
        if openSSLError != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(openSSLError, &buf, buf.count)
            self.message = message + " (" + String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + ")"
        } else {
            self.message = message
        }
    }

    init(transport failure: TransportFailure, _ message: String, underlyingCode: Int = 0) {
        self.code = .transport
        self.transportFailure = failure
        self.message = message
        self.underlyingCode = underlyingCode
    }

    /// Whether trying again (later or elsewhere) may succeed.
    package var isRetriable: Bool {
        if let transportFailure {
            if case .retry = DeliveryDecision(failure: transportFailure) { return true }
            return false
        }
        return false
    }

    package var description: String {
        if let transportFailure { return "APNsClientError(\(code), \(transportFailure)): \(message)" }
        return "APNsClientError(\(code)): \(message)"
    }
}
