import APNsCore
import Synchronization

/// One request on its way through a connection.
///
/// Invariant for `@unchecked Sendable`: the sender creates it and hands it over through the connection's
/// locked inbox; from then on only the connection's I/O thread reads or writes it.
final class StreamRequest: @unchecked Sendable {
    let prepared: PreparedRequest
    let deadline: ContinuousClock.Instant
    let enqueuedAt: ContinuousClock.Instant
    private var continuation: CheckedContinuation<APNsResponse, any Error>?
    /// Set by the caller's cancellation handler (any thread); the I/O thread acts on it.
    let cancelled = Atomic<Bool>(false)
    var streamID: Int32 = 0
    var payloadOffset = 0
    var status: Int?
    var apnsID: String?
    var apnsUniqueID: String?
    var body: [UInt8] = []
    /// Bodies are a small JSON object; anything longer is cut to keep memory bounded.
    static let maxBody = 4096

    init(prepared: PreparedRequest, deadline: ContinuousClock.Instant) {
        self.prepared = prepared
        self.deadline = deadline
        self.enqueuedAt = .now
    }

    /// Called once, by the sender, before the request is handed to the I/O thread.
    func attach(_ continuation: CheckedContinuation<APNsResponse, any Error>) {
        self.continuation = continuation
    }

    var isCompleted: Bool { continuation == nil }

    /// Resumes the caller exactly once; later calls are ignored.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let c = continuation else { return }
        continuation = nil
        switch result {
        case .success(let r): c.resume(returning: r)
        case .failure(let e): c.resume(throwing: e)
        }
    }

    func completeCancelled() {
        guard let c = continuation else { return }
        continuation = nil
        c.resume(throwing: CancellationError())
    }

    func fail(_ failure: TransportFailure, _ message: String) {
        complete(.failure(APNsClientError(transport: failure, message)))
    }
}
