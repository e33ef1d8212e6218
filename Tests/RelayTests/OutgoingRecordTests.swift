import Foundation
import Kafka
import RelayContract
import ServiceSupport
import Testing
@testable import Relay

/// A result record's value is written only when it is produced, into a reused buffer; its smaller form
/// (for a record Kafka refuses for good) is derived from the same result.
@Suite struct OutgoingRecordTests {
    private func result(message: String?, metadata: String?) -> DeliveryResult {
        DeliveryResult(
            eventID: "e1", metadata: metadata.map { Array($0.utf8) }, outcome: .failed, status: 500, reason: "InternalServerError",
            message: message, attempts: 3, source: SourcePosition(topic: "in", partition: 2, offset: 41),
            receivedAt: 1_700_000_000_000, completedAt: 1_700_000_000_250)
    }

    private func json(_ record: OutgoingRecord, _ buffers: ByteBufferPool) throws -> [String: Any] {
        let bytes = record.withValue(buffers) { Array($0 ?? []) }  // copied: the buffer is lent, not kept
        return try #require(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func aResultIsWrittenWhenProducedAndAReusedBufferCarriesNothingOver() throws {
        let outputs = OutputRecords(topics: .defaults, maxDeadLetterBytes: 1 << 20)
        let buffers = ByteBufferPool.forRecords()
        let long = outputs.result(result(message: String(repeating: "x", count: 2000), metadata: #"{"user":"u1"}"#), key: Array("k1".utf8)[...], source: SourcePosition(topic: "in", partition: 2, offset: 41))
        let short = outputs.result(result(message: nil, metadata: nil), key: nil, source: SourcePosition(topic: "in", partition: 2, offset: 41))
        let first = try json(long, buffers)
        #expect(first["id"] as? String == "e1" && (first["metadata"] as? [String: Any])?["user"] as? String == "u1")
        #expect((first["message"] as? String)?.count == 2000)
        // The same buffer again, for a shorter record: nothing of the longer one may be left in it.
        let second = try json(short, buffers)
        #expect(second["message"] == nil && second["metadata"] is NSNull, "\(second)")
        #expect(long.withValue(buffers) { $0 } == result(message: String(repeating: "x", count: 2000), metadata: #"{"user":"u1"}"#).jsonBytes())
    }

    /// The contract's smaller form: no metadata, the message cut to 512 characters, keyed by the source
    /// position (`topic/partition/offset`), no headers.
    @Test func aResultsSmallerFormDropsMetadataCutsTheMessageAndIsKeyedByItsSource() throws {
        let outputs = OutputRecords(topics: .defaults, maxDeadLetterBytes: 1 << 20)
        var record = outputs.result(result(message: String(repeating: "y", count: 2000), metadata: #"{"user":"u1"}"#), key: Array("k1".utf8)[...], source: SourcePosition(topic: "in", partition: 2, offset: 41))
        record.headers = [KafkaHeader(name: "traceparent", value: Array("00-x".utf8))]
        let smaller = try #require(record.smallerForm())
        #expect(smaller.topic == record.topic)
        #expect(smaller.key.map(Array.init) == Array("in/2/41".utf8))
        #expect(smaller.headers.isEmpty)
        #expect(smaller.smallerForm() == nil, "the smaller form is the smallest")
        let value = try json(smaller, ByteBufferPool.forRecords())
        #expect(value["metadata"] is NSNull)
        #expect((value["message"] as? String) == String(repeating: "y", count: 512))
        #expect(value["outcome"] as? String == "failed" && value["attempts"] as? Int == 3)
    }
}
