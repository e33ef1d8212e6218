/// A dead letter's headers read back (`apns-relay replay`): the relay's block, and the event's own headers as
/// the producer sent them.
///
/// The relay's block is every header in its namespaces (``DeadLetter/Header/isReserved(_:)``). A dead letter
/// written since original headers are renamed has exactly one of each; one written before may also carry a
/// producer's headers of those names, copied ahead of the relay's. Each value read here is the *last* of its
/// name (the relay's block came last), and ``repeatedNames`` lists the names found more than once, so a reader
/// can refuse a dead letter whose block it cannot attribute to the relay.
package struct DeadLetterHeaders: Sendable, Hashable {
    /// The last value of each relay-named header (a header without a value reads as empty).
    package var relays: [String: String]
    /// Relay-named headers found more than once, in the order of their first occurrence.
    package var repeatedNames: [String]
    /// The event's headers as the producer sent them (`__original.` names restored), in their order, less
    /// those in the relay's namespaces.
    package var originals: [RecordHeader]

    package init(_ headers: [RecordHeader]) {
        var relays: [String: String] = [:]
        var repeated: [String] = []
        var originals: [RecordHeader] = []
        for header in headers {
            if DeadLetter.Header.isReserved(header.name) {
                let value = header.value.map { String(decoding: $0, as: UTF8.self) } ?? ""
                if relays.updateValue(value, forKey: header.name) != nil, !repeated.contains(header.name) {
                    repeated.append(header.name)
                }
                continue
            }
            let name = DeadLetter.Header.originalName(ofKept: header.name)
            // A producer's header in the relay's namespaces is dropped, not restored: the replayed event then
            // carries no header that poses as a dead letter's, even to a reader that still takes the first
            // `__connect.errors.topic` it finds (Kafka Connect tooling, a relay from before the renaming during a
            // rolling upgrade). The dead letter keeps it, renamed, for whoever investigates; the previous replay
            // dropped these names too, so no producer relies on getting them back.
            if DeadLetter.Header.isReserved(name) { continue }
            originals.append(RecordHeader(name: name, value: header.value))
        }
        self.relays = relays
        self.repeatedNames = repeated
        self.originals = originals
    }

    package subscript(_ name: String) -> String? { relays[name] }

    /// The topic the event was consumed from (`__connect.errors.topic`).
    package var topic: String? { relays[DeadLetter.Header.topic] }
    /// The event's error code (`__connect.errors.exception.class.name`).
    package var errorCode: String? { relays[DeadLetter.Header.errorCode] }
    /// The refusing stage (`__connect.errors.stage`).
    package var stage: String? { relays[DeadLetter.Header.stage] }

    /// `topic[partition]@offset` of the event, `?` for what is missing.
    package var position: String {
        "\(topic ?? "?")[\(relays[DeadLetter.Header.partition] ?? "?")]@\(relays[DeadLetter.Header.offset] ?? "?")"
    }

    /// Whether the relay cut the value, replaced the key or dropped the headers: the dead letter is then not the
    /// event the producer sent.
    package var wasCut: Bool {
        relays[DeadLetter.Header.truncated] != nil || relays[DeadLetter.Header.originalKeySize] != nil
            || relays[DeadLetter.Header.originalHeadersDropped] != nil
    }
}
