import RelayContract
import Testing

/// Only the relay writes names in its namespaces in a dead letter; the event's own headers of those names are
/// kept under `__original.` and come back, less those names, when the dead letter is read back.
@Suite struct DeadLetterHeaderTests {
    let source = SourcePosition(topic: "apns-notifications", partition: 2, offset: 7)

    func header(_ name: String, _ value: String) -> RecordHeader { RecordHeader(name: name, value: Array(value.utf8)) }

    func letter(_ headers: [RecordHeader]) -> DeadLetter {
        DeadLetter(
            originalKey: nil, originalValue: Array("{}".utf8), originalHeaders: headers, source: source, stage: .schema,
            errorCode: "schema_violation", message: "refused", limits: .init(maxBytes: 921_600))
    }

    @Test(arguments: [
        ("__connect.errors.topic", "__original.__connect.errors.topic"),
        ("__connect.worker.id", "__original.__connect.worker.id"),
        ("apns-relay.truncated", "__original.apns-relay.truncated"),
        ("__original.trace-id", "__original.__original.trace-id"),
        ("trace-id", "trace-id"),
        ("__connect", "__connect"),
    ])
    func reservedNamesAreKeptUnderThePrefixAndComeBack(name: String, kept: String) {
        #expect(DeadLetter.Header.keptName(name) == kept)
        #expect(DeadLetter.Header.originalName(ofKept: kept) == name)
    }

    @Test func theEventsHeadersCannotPoseAsTheRelays() {
        let own = [
            header("__connect.errors.topic", "apns-removed-tokens"),
            header("__connect.errors.exception.class.name", "schema_violation"),
            header("apns-relay.truncated", "true"), header("trace-id", "t-1"), header("__original.note", "n"),
        ]
        let dead = letter(own)
        let names = dead.headers.map(\.name)
        for name in [DeadLetter.Header.topic, DeadLetter.Header.errorCode] {
            #expect(names.filter { $0 == name }.count == 1, "\(name) in \(names)")
        }
        #expect(
            names.prefix(5) == [
                "__original.__connect.errors.topic", "__original.__connect.errors.exception.class.name",
                "__original.apns-relay.truncated", "trace-id", "__original.__original.note",
            ])
        #expect(dead.headers.first?.value == Array("apns-removed-tokens".utf8), "kept as it came, for forensics")

        let read = DeadLetterHeaders(dead.headers)
        #expect(read.repeatedNames.isEmpty)
        #expect(read.topic == "apns-notifications")
        #expect(read.position == "apns-notifications[2]@7")
        #expect(!read.wasCut, "a forged apns-relay.truncated is the producer's, not a cut")
        // The producer's headers come back, less the ones posing as the relay's.
        #expect(read.originals == [header("trace-id", "t-1"), header("__original.note", "n")])
    }

    /// A dead letter written before the renaming: the producer's copies come first, the relay's block last.
    @Test func aRepeatedRelayNameIsReportedAndTheLastValueRead() {
        let headers = [
            header("__connect.errors.topic", "apns-removed-tokens"), header("trace-id", "t-1"),
            header("__connect.errors.topic", "apns-notifications"), header("__connect.errors.stage", "schema"),
        ]
        let read = DeadLetterHeaders(headers)
        #expect(read.repeatedNames == ["__connect.errors.topic"])
        #expect(read.topic == "apns-notifications")
        #expect(read.originals == [header("trace-id", "t-1")])
    }

    @Test func renamedHeadersCountTowardTheOriginalHeaderBudget() {
        var limits = DeadLetter.Limits(maxBytes: 921_600)
        let own = [header("__connect.errors.topic", "x")]
        limits.maxOriginalHeaderBytes = RecordLimits.bytes(of: own)
        let dead = DeadLetter(
            originalKey: nil, originalValue: nil, originalHeaders: own, source: source, stage: .schema, errorCode: "c",
            message: "m", limits: limits)
        #expect(
            dead.headers.contains { $0.name == DeadLetter.Header.originalHeadersDropped },
            "the renamed header is larger")
    }
}
