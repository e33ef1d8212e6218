import APNsCore
import COpenSSL

/// Why the client could not get an APNs response.
///
/// Transport failures carry a `TransportFailure` so callers can map them with `DeliveryDecision(failure:)`.
public struct APNsClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Extensible error code.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case transport, invalidCredential, invalidConfiguration, signingFailed, tls, shutdown, cancelled
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        /// No response: see `transportFailure`.
        public static let transport = Code(.transport)
        public static let invalidCredential = Code(.invalidCredential)
        public static let invalidConfiguration = Code(.invalidConfiguration)
        public static let signingFailed = Code(.signingFailed)
        /// TLS set-up (context, certificates) failed locally.
        public static let tls = Code(.tls)
        /// The client is shutting down.
        public static let shutdown = Code(.shutdown)
        /// The caller cancelled the request (``RequestTicket/cancel()``); the async `send` throws
        /// `CancellationError` instead.
        public static let cancelled = Code(.cancelled)
        public var description: String { base.rawValue }
    }

    public let code: Code
    public let message: String
    /// Set when `code == .transport`.
    public let transportFailure: TransportFailure?
    /// OpenSSL's `ERR_get_error` (read in the call that failed) or an nghttp2 / errno code, when there is one.
    public let underlyingCode: Int

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
    public var isRetriable: Bool {
        if let transportFailure {
            if case .retry = DeliveryDecision(failure: transportFailure) { return true }
            return false
        }
        return false
    }

    public var description: String {
        if let transportFailure { return "APNsClientError(\(code), \(transportFailure)): \(message)" }
        return "APNsClientError(\(code)): \(message)"
    }
}
