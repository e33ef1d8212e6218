import APNsCore
import Synchronization

/// One request on its way through a connection.
///
/// Invariant for `@unchecked Sendable`: the sender creates it and hands it over through the connection's
/// locked inbox; from then on only the connection's event loop reads or writes it (`cancelled` excepted).
final class StreamRequest: @unchecked Sendable {
    let prepared: PreparedRequest
    let deadline: ContinuousClock.Instant
    let enqueuedAt: ContinuousClock.Instant
    /// Runs once, on the event loop with the turn's other answers (or on the submitting thread when the
    /// connection refuses the request).
    private var completion: Completion?
    /// Set by the caller's cancellation (any thread); the event loop acts on it.
    let cancelled = Atomic<Bool>(false)
    var streamID: Int32 = 0
    var payloadOffset = 0
    var status: Int?
    var apnsID: String?
    var apnsUniqueID: String?
    var channelID: String?
    /// At most `prepared.maxResponseBody` bytes.
    var body: [UInt8] = []

    typealias Completion = @Sendable (Result<APNsResponse, APNsClientError>) -> Void

    init(prepared: PreparedRequest, deadline: ContinuousClock.Instant, completion: @escaping Completion) {
        self.prepared = prepared
        self.deadline = deadline
        self.enqueuedAt = .now
        self.completion = completion
    }

    var isCompleted: Bool { completion == nil }

    /// Completes the request exactly once; later calls are ignored.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }

    static let cancelledError = APNsClientError(.cancelled, "cancelled by the caller")

    func completeCancelled() {
        complete(.failure(Self.cancelledError))
    }

    func fail(_ failure: TransportFailure, _ message: String) {
        complete(.failure(APNsClientError(transport: failure, message)))
    }
}
