import RelayContract
import Testing

/// A dead letter always fits its budget, whatever the original key, value and headers were.
@Suite struct DeadLetterLimitsTests {
    let source = SourcePosition(topic: "in", partition: 2, offset: 7)

    func letter(key: Int?, value: Int, headers: [RecordHeader] = [], limits: DeadLetter.Limits = .init(maxBytes: 921_600)) -> DeadLetter {
        DeadLetter(
            originalKey: key.map { Array(repeating: 1, count: $0) }, originalValue: Array(repeating: 2, count: value),
            originalHeaders: headers, source: source, stage: .size, errorCode: "event_too_large", message: "too large", limits: limits)
    }

    @Test(arguments: [(0, 0, 0), (200_000, 800_000, 0), (10, 2_000_000, 0), (10, 10, 950_000), (900_000, 900_000, 900_000)])
    func staysWithinItsBudget(key: Int, value: Int, headerBytes: Int) {
        let headers = headerBytes == 0 ? [] : [RecordHeader(name: "big", value: Array(repeating: 3, count: headerBytes))]
        let dead = letter(key: key, value: value, headers: headers)
        #expect(dead.byteCount <= 921_600, "\(dead.byteCount) bytes")
    }

    @Test func keepsWhatFitsAndSaysWhatItCut() {
        let small = letter(key: 10, value: 1000)
        #expect(small.key?.count == 10)
        #expect(small.value?.count == 1000)
        #expect(!small.headers.contains { $0.name.hasPrefix("apns-relay.") })

        let cut = letter(key: 10, value: 2_000_000)
        #expect(cut.headers.contains { $0.name == "apns-relay.truncated" })
        #expect(cut.headers.contains { $0.name == "apns-relay.original.size" && $0.value == Array("2000000".utf8) })
    }

    @Test func theFallbackIsSmallAndKeyedBySourcePosition() {
        let headers = [RecordHeader(name: "trace", value: Array("abc".utf8))]
        let fallback = letter(key: nil, value: 100_000, headers: headers, limits: .fallback)
        #expect(fallback.key == Array("in/2/7".utf8), "never a null key: a compacted topic refuses those")
        #expect(fallback.byteCount <= RecordLimits.fallbackBytes)
        #expect(!fallback.headers.contains { $0.name == "trace" })
        #expect(fallback.headers.contains { $0.name == "__connect.errors.offset" })
    }
}
