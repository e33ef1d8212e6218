import Foundation
import RelaySandbox
import TestSupport
import Testing

extension FaultTests {
    /// A generated corpus of mutated events (number and string grammar, escapes, surrogates, bad UTF-8,
    /// duplicate keys, depth, size, truncation, random byte damage; see `MutationCorpus`) plus raw random
    /// bytes, through the real pipeline: no crash, no hang, and every input gets a result.
    @Test func fuzzedInputAlwaysGetsAResult() async throws {
        let seed = FaultSize.seed()
        print("fault input-fuzz: seed \(seed) (replay with APNS_RELAY_FAULTS_SEED=\(seed))")
        let count = FaultSize.pick(reduced: 1500, full: 12000)
        var corpus = MutationCorpus(seed: seed)
        var random = SeededGenerator(seed: seed ^ 0xF022)
        var events: [(key: String, value: [UInt8])] = corpus.cases(count * 9 / 10).enumerated().map { (key: "f\($0.offset)", value: $0.element.bytes) }
        for n in events.count..<count {
            let length = Int.random(in: 0...600, using: &random)
            events.append((key: "f\(n)", value: (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }))
        }
        var options = RelaySandbox.Options()
        // ~5 % of the corpus is ~65 KB events; the mock broker keeps only ~5 MB per partition.
        options.partitions = FaultSize.pick(reduced: 6, full: 24)
        try await withSandbox(options, logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: sandbox.options.topics.results)
            let started = ContinuousClock.now
            try await withRelay(sandbox, overrides: ["relay.requestTimeoutMs": "2000", "relay.retry.maxAttempts": "3"], logger: logger) { _ in
                try await sandbox.produce(events)
                // The deadline is the hang check: a stuck decoder or a stuck partition never gets here.
                try await tally.collect(from: reader, expected: Set(events.map(\.key)), timeout: .seconds(FaultSize.pick(reduced: 120, full: 400)))
            }
            await reader.close()
            print("fault input-fuzz: \(count) inputs answered in \(ContinuousClock.now - started)")
            finishFaultRun("input-fuzz", tally: tally, expected: Set(events.map(\.key)), faults: count, duplicateBound: 0)
            #expect(tally.outcomes["unparseable"] == nil, "every result is JSON")
        }
    }
}
