import APNsCore
import Kafka
import RelayContract

/// The records the relay publishes for an event, each with a smaller form Kafka always accepts
/// (`OutgoingRecord.fallback`) for when it refuses the full one.
struct OutputRecords: Sendable {
    let topics: RelayConfiguration.Topics
    let maxDeadLetterBytes: Int

    /// The result record. Its key is the event's Kafka key, else its id, else its source position: never
    /// null (a compacted results topic refuses null keys) and never larger than `RecordLimits.maxKeyBytes`.
    func result(_ result: DeliveryResult, key: ArraySlice<UInt8>?, source: SourcePosition) -> OutgoingRecord {
        let usableKey = key.flatMap { $0.count <= RecordLimits.maxKeyBytes ? $0 : nil }
        return OutgoingRecord(
            topic: topics.results, key: usableKey ?? (result.eventID.map { Array($0.utf8) } ?? source.recordKey)[...], value: .result(result),
            fallback: .result
        )
    }

    /// The dead letter, within `relay.maxDeadLetterBytes`; its fallback is the small form (`DeadLetter.Limits.fallback`).
    func deadLetter(for message: KafkaConsumerMessage, source: SourcePosition, refusal: Refusal) -> OutgoingRecord {
        let topic = topics.deadLetters
        @Sendable func make(_ limits: DeadLetter.Limits) -> DeadLetter {
            DeadLetter(
                originalKey: message.key.map(Array.init), originalValue: message.value.map(Array.init), originalHeaders: message.headers.map(RecordHeader.init),
                headersLeftOut: message.headersLeftOut.count, source: source, stage: refusal.stage, errorCode: refusal.code, message: refusal.message, limits: limits)
        }
        let letter = make(DeadLetter.Limits(maxBytes: maxDeadLetterBytes))
        return OutgoingRecord(
            topic: topic, key: letter.key, value: letter.value, headers: letter.headers.map(KafkaHeader.init),
            fallback: .build {
                let small = make(.fallback)
                return OutgoingRecord(topic: topic, key: small.key, value: small.value, headers: small.headers.map(KafkaHeader.init))
            }
        )
    }

    /// The record that tells producers a target is gone, or `nil` for other answers: a removed-token record
    /// for 410s and for BadDeviceToken (a token of the other environment, usually), a removed-channel record
    /// for ChannelNotRegistered. BadDeviceToken and ChannelNotRegistered ones pass `TokenRemovalGuard`
    /// first (the caller asks it).
    func removal(for event: NotificationEvent, report: DeliveryReport) -> OutgoingRecord? {
        let invalidatedAt: Int64?
        switch report.decision {
        case .unregistered(let timestamp)?: invalidatedAt = timestamp
        case .rejected(removesTarget: true)?: invalidatedAt = nil
        default: return nil
        }
        // After the answer's check: asked for every delivered event, and a copy of the notification retains
        // each of its buffers.
        let notification = event.notification
        let reason = report.response?.reason?.rawValue
        switch notification.target {
        case .device(let deviceToken):
            var removed = TokenRemoved(
                deviceToken: deviceToken, topic: notification.topic, environment: event.environment,
                reason: reason ?? "Unregistered", invalidatedAt: invalidatedAt, eventID: event.id, metadata: event.metadata
            )
            let value = removed.jsonBytes()
            removed.metadata = nil
            return Self.record(topic: topics.removedTokens, key: removed.key, value: value, fallback: removed.jsonBytes())
        case .channel(let channelID):
            var removed = ChannelRemoved(
                channelID: channelID, bundleID: notification.topic, environment: event.environment,
                reason: reason ?? APNsReason.channelNotRegistered.rawValue, eventID: event.id, metadata: event.metadata
            )
            let value = removed.jsonBytes()
            removed.metadata = nil
            return Self.record(topic: topics.removedChannels, key: removed.key, value: value, fallback: removed.jsonBytes())
        }
    }

    /// A record whose smaller form (`fallback`, without metadata) Kafka always accepts.
    private static func record(topic: String, key: [UInt8], value: [UInt8], fallback: [UInt8]) -> OutgoingRecord {
        OutgoingRecord(topic: topic, key: key, value: value, fallback: .encoded(topic: topic, key: key, value: fallback))
    }
}
