import APNsCore
import Kafka
import Logging
import RelayContract

/// One consumed event on its way through the relay, from its admission on the consumer loop to its entry
/// in the offset ledger: what every stage needs to know about where it came from. Built once, when the
/// event is admitted; the stages add what they learn (the decoded event, the delivery report) beside it.
struct InFlightEvent: Sendable {
    /// The Kafka record as consumed: its key goes into the result, its key, value and headers into the
    /// dead letter.
    let message: KafkaConsumerMessage
    /// Topic, partition and offset, as the result and the dead letter name them.
    let source: SourcePosition
    /// What the event holds of the in-flight byte budget (`relay.inFlight.maxBytes`): its value's size.
    let bytes: Int
    /// When the relay took the event (Unix milliseconds): the result's `receivedAt`, and where the
    /// latency histogram starts.
    let receivedAt: Int64
    /// Its spans, when tracing is on (`EventTracing`), from its admission on.
    var trace: EventTrace?

    init(_ message: KafkaConsumerMessage, receivedAt: Int64, trace: EventTrace? = nil) {
        self.message = message
        self.source = SourcePosition(topic: message.topic, partition: message.partition, offset: message.offset)
        self.bytes = message.value?.count ?? 0
        self.receivedAt = receivedAt
        self.trace = trace
    }

    var partition: KafkaTopicPartition { message.topicPartition }
    /// The lane its topic is read in (`kafka.topics.urgent`, or bulk).
    var lane: DeliveryLane { DeliveryLane(message.lane) }

    /// Topic, partition and offset, for log lines about this event.
    var logMetadata: Logger.Metadata {
        ["topic": "\(source.topic)", "partition": "\(source.partition)", "offset": "\(source.offset)"]
    }
}
