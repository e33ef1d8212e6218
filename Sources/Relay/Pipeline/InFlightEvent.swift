import APNsCore
import Kafka
import Logging
import RelayContract
import ServiceSupport
import Tracing

/// One consumed event on its way through the relay, from its admission on the consumer loop to its entry
/// in the offset ledger: the one value every stage takes and hands on. Built when the event is admitted;
/// triage adds what an event to deliver needs (`delivery`), the attempts record their progress there.
///
/// An object, allocated once: every stage borrows it, and every hand-off (into a delivery's completion, a
/// retry, the publisher) retains one reference instead of copying the record, the decoded event and the
/// credential (a copy of the struct cost a dozen reference-count operations, in each closure that took it).
///
/// Invariant for `@unchecked Sendable`: one stage at a time has it, and each hands it to the next through a
/// lock, a queue or librdkafka's callback (which order the writes): the consumer loop (admission, `trace`,
/// `delivery`), then the delivery's attempts (`delivery.progress` and `awaitedAnswer`, set before each send
/// and taken by its answer, on an APNs event loop or a retry's task, one attempt after another; the APNs
/// client's locks order the send and its answer), then publication (`delivery` taken, `publishing` set before
/// the records go to the publisher, whose completion reads it). Nothing reads it concurrently. What the
/// publisher keeps of it while its records are on their way is its base class's (`PublishedEvent`).
final class InFlightEvent: PublishedEvent, @unchecked Sendable {
    /// The Kafka record as consumed: its key goes into the result, its key, value and headers into the
    /// dead letter.
    let message: KafkaConsumerMessage
    /// Topic, partition and offset, as the result and the dead letter name them.
    let source: SourcePosition
    /// What the event holds of the in-flight byte budget (`relay.maxInFlightBytes`): its record's footprint
    /// (key, value and headers, which it keeps for its dead letter, and their objects), not only its value:
    /// events whose headers dwarf their value would otherwise fit the budget many times over.
    let bytes: Int
    /// When the relay took the event (Unix milliseconds): the result's `receivedAt`, and where the
    /// latency histogram starts.
    let receivedAt: Int64
    /// The lane its topic is read in (`kafka.topics.urgent`, or bulk): its share of the in-flight limits and
    /// of APNs' streams.
    let lane: DeliveryLane
    /// Its spans, when tracing is on (`EventTracing`), from its admission on.
    var trace: EventTrace?
    /// A valid event's delivery, from triage on; `nil` for an event answered without sending.
    var delivery: Delivery?
    /// While an attempt is out at APNs: what its answer goes to (``APNsAnswerHandler/answered(_:)``).
    var awaitedAnswer: AwaitedAnswer?
    /// From publication on: what its end counts of its result, and the span that publishes its records.
    var publishing: Publishing?

    /// Takes `message` over (the consumer's copy moves in; its buffers are not retained again).
    init(_ message: consuming KafkaConsumerMessage, receivedAt: Int64) {
        self.source = SourcePosition(topic: message.topic, partition: message.partition, offset: message.offset)
        self.bytes = message.footprint
        self.receivedAt = receivedAt
        self.lane = DeliveryLane(message.lane)
        self.message = consume message
        super.init()
    }

    var partition: KafkaTopicPartition { message.topicPartition }

    /// A valid event's delivery, in place: reading a field as `delivery!.field` copies the whole delivery
    /// first (a retain and a release of each reference in it). `body` must not reach this event: it runs
    /// inside the access.
    func withDelivery<R>(_ body: (inout Delivery) -> R) -> R { body(&delivery!) }

    /// Topic, partition and offset, for log lines about this event.
    var logMetadata: Logger.Metadata {
        ["topic": "\(source.topic)", "partition": "\(source.partition)", "offset": "\(source.offset)"]
    }
}

/// The event is what hears its attempts' answers: the APNs client keeps it for the request, and no closure is
/// allocated per attempt.
extension InFlightEvent: APNsAnswerHandler {
    func answered(_ result: Result<APNsResponse, any Error>) {
        guard let awaited = awaitedAnswer.take() else { preconditionFailure("an APNs answer for an event with no attempt out") }
        awaited.attempts.answered(result, for: self, span: awaited.span, completion: awaited.completion)
    }
}

/// What an event's end counts of its result (metrics, its trace's publish span).
struct Publishing: Sendable {
    var outcome: DeliveryOutcome
    var reason: String?
    var broadcast: Bool
    var span: (any Span)?
}

/// An attempt out at APNs: who takes its answer (set by `DeliveryAttempts` before each send).
struct AwaitedAnswer: Sendable {
    let attempts: DeliveryAttempts
    let span: (any Span)?
    let completion: @Sendable (InFlightEvent, DeliveryReport) -> Void
}

/// A valid event on its way to APNs: what triage found, and how far its attempts got.
struct Delivery: Sendable {
    /// The event as decoded; its `notification` (in the event's lane) is what goes to APNs.
    let event: NotificationEvent
    /// The credential that covers the notification's topic in its environment, looked up once, in triage:
    /// it sends every attempt, and the token-removal guard counts the answers under its name.
    let credential: CredentialDirectory.Credential
    /// Attempts so far.
    var progress = DeliveryProgress()

    /// A copy (each of its buffers retained): on the per-event path, read `event.notification` in place.
    var notification: APNsNotification { event.notification }
}

/// What carries over from one delivery attempt to the next.
struct DeliveryProgress: Sendable, Hashable {
    /// Attempts APNs may have seen (a request never sent does not count).
    var attempts = 0
    /// Retries that refreshed the provider token first (`ExpiredProviderToken`).
    var tokenRefreshes = 0
    /// Resends after an attempt APNs may have received (a timeout or a lost connection after the request
    /// was sent): each may have pushed the notification twice.
    var possibleDuplicates = 0
    /// When the last attempt started (its one reading of the clock): the token-removal screen counts the
    /// attempt's answer at this time, which spares the answer a reading of its own.
    var lastAttemptAt: MonotonicInstant?
}
