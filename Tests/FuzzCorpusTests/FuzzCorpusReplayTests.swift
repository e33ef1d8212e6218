import APNsClient
import APNsCore
import Foundation
import Testing

@testable import FuzzTargets

/// Every input of the committed fuzz corpus (Fuzz/corpus/<target>/) through the same entry the libFuzzer binaries
/// call (`FuzzTarget.run`), in the normal debug build: an input that crashes, or breaks a guarantee a target checks,
/// stops the test process. `make fuzz` searches for new such inputs; this keeps the ones found (and the seeds)
/// passing as the code changes.
@Suite struct FuzzCorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    @Test(arguments: FuzzTarget.allCases)
    func replaysTheCorpusWithoutACrash(_ target: FuzzTarget) async throws {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }.sorted()
        // An empty or missing folder would replay nothing and pass.
        try #require(!names.isEmpty, "no corpus inputs in \(folder.path)")
        for name in names {
            let input = try Data(contentsOf: folder.appendingPathComponent(name))
            await target.run(Array(input))
        }
    }

    /// The configuration input's sections split as `ConfigurationTarget` documents, so hand-written corpus files
    /// mean what they say.
    @Test func configurationInputSplitsIntoFileEnvironmentAndSetItems() {
        let text = "Jkafka: {}\u{1E}APNS_RELAY_LOG_LEVEL=debug\nNO_EQUALS\nA=b=c\u{1E}kafka.groupId=g=1\n=orphan\nlog.format=text"
        let input = ConfigurationTarget.input(Array(text.utf8))
        #expect(input.file?.kind == .json)
        #expect(input.file.map { String(decoding: $0.text, as: UTF8.self) } == "kafka: {}")
        #expect(input.environment == ["APNS_RELAY_LOG_LEVEL": "debug", "A": "b=c"])
        #expect(input.overrides == ["kafka.groupId": "g=1", "log.format": "text"])

        #expect(ConfigurationTarget.input(Array("N\u{1E}\u{1E}".utf8)).file == nil)
        let yaml = ConfigurationTarget.input(Array("kafka:\n  groupId: g".utf8))
        #expect(yaml.file?.kind == .yaml)
        #expect(yaml.file.map { String(decoding: $0.text, as: UTF8.self) } == "kafka:\n  groupId: g")
    }

    /// The answer input's header lines and body, as `APNsAnswerTarget` documents them; the values are APNs'
    /// (apns-reference.md: 410 with `timestamp` in milliseconds).
    @Test func apnsAnswerInputReadsHeadersThenBody() throws {
        let text = ":status: 410\napns-id: 1B8E4F2A-0C3D-4E5F-8A9B-0C1D2E3F4A5B\napns-unique-id:u\n\n{\"reason\":\"Unregistered\",\"timestamp\":1700000000000}"
        let (head, body) = APNsAnswerTarget.answer(Array(text.utf8))
        #expect(head.status == 410)
        #expect(head.apnsID == "1B8E4F2A-0C3D-4E5F-8A9B-0C1D2E3F4A5B")
        #expect(head.apnsUniqueID == "u")
        let response = try #require(head.response(body: body, keepsBody: false))
        #expect(response.reason == .unregistered)
        #expect(response.timestamp == 1_700_000_000_000)
    }

    /// The fuzzer's first finding (corpus `apns-answer/regression-status-overflow`): a `:status` longer than three
    /// digits overflowed. A status is three digits (RFC 9110 §15); anything else is no answer at all.
    @Test(arguments: ["2000", "20", "2x0", "", " 200", "99999999999999999999999"])
    func malformedStatusIsNoAnswer(_ status: String) {
        let (head, body) = APNsAnswerTarget.answer(Array(":status: \(status)\n\n{\"reason\":\"BadPath\"}".utf8))
        #expect(head.status == nil)
        #expect(head.response(body: body, keepsBody: false) == nil)
    }
}
