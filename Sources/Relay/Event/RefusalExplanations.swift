import Dispatch
import RelayContract
import Synchronization

/// The slow part of answering a schema-invalid event, off the consumer loop and bounded: the id and
/// metadata echo (`SalvagedEvent`, a full parse) and the reference validator's account of every problem.
///
/// One serial queue does it (libdispatch runs it on a thread outside Swift's cooperative pool; the detailed
/// pass needs no stack beyond a thread's default, see `SchemaPatterns.cpp`). Its backlog is bounded
/// (`maxBacklog`): past it, an event is answered at once with the fast decoder's message and no echo, so a
/// producer flooding invalid events gets cheap answers instead of a queue that holds everyone's in-flight
/// budget. Events over `maxExplainedBytes` are echoed but not explained in detail: the pass costs time
/// linear in the event, and the fast decoder's first problem says enough about an event that size.
///
/// Thread-safe: `submit` is called from the consumer loop, the work runs on the queue.
final class RefusalExplanations: Sendable {
    /// The largest event the detailed pass explains. A legitimate event is far smaller: APNs takes at most
    /// 5 KiB of payload (VoIP; 4 KiB otherwise) and the schema's other fields together at most about 1.5 KiB,
    /// so an invalid event over 16 KiB is rarely a mistake worth every problem listed, and explaining it is
    /// what a flood would buy (measured here: ~0.5–1 ms for a 57 KiB event once patterns are bounded).
    static let maxExplainedBytes = 16 * 1024
    /// How many refused events may wait for their explanation. At the worst cost of one (a salvage of a
    /// 64 KiB event plus a detailed pass of a 16 KiB one, about 1 ms) an answer waits at most ~64 ms here,
    /// and the waiting events hold at most 64 of the in-flight budget's events (5,000 by default) and 4 MiB
    /// of its bytes (64 MiB).
    static let maxBacklog = 64

    /// Why an event's refusal went without the slow part.
    enum Shortcut: Sendable, Equatable {
        /// Explained in full.
        case none
        /// Over `maxExplainedBytes`: echoed, with the fast decoder's message.
        case tooLarge
        /// The backlog was full: answered at once, with the fast decoder's message and no echo.
        case backlogFull
    }

    /// `nil` if it could not be built: then events are only echoed.
    private let validator: SchemaValidator?
    private let queue: DispatchQueue
    private let waiting = Atomic<Int>(0)
    let maxBacklog: Int
    let maxExplainedBytes: Int

    /// - Parameter queue: a serial queue the work runs on (a test suspends it to fill the backlog).
    init(
        validator: SchemaValidator?, maxBacklog: Int = maxBacklog, maxExplainedBytes: Int = maxExplainedBytes,
        queue: DispatchQueue = DispatchQueue(label: "apns-relay.explanations")
    ) {
        self.validator = validator
        self.maxBacklog = maxBacklog
        self.maxExplainedBytes = maxExplainedBytes
        self.queue = queue
    }

    /// Events waiting for (or in) their explanation.
    var backlog: Int { waiting.load(ordering: .relaxed) }

    /// Queues the salvage and explanation of a refused event and calls `answered` with the result on the
    /// queue; returns `false` without calling it when the backlog is full (answer the event at once then).
    func submit(
        _ result: DeliveryResult, _ refusal: Refusal, bytes: ArraySlice<UInt8>,
        answered: @escaping @Sendable (DeliveryResult, Refusal, Shortcut) -> Void
    ) -> Bool {
        // Reserve a place first, so that concurrent callers never exceed the bound.
        guard waiting.add(1, ordering: .relaxed).newValue <= maxBacklog else {
            waiting.subtract(1, ordering: .relaxed)
            return false
        }
        queue.async { [self] in
            let detailed = bytes.count <= maxExplainedBytes
            let (result, refusal) = EventTriage.explained(result, refusal, bytes: bytes, by: detailed ? validator : nil)
            waiting.subtract(1, ordering: .relaxed)
            answered(result, refusal, detailed ? .none : .tooLarge)
        }
        return true
    }
}
