import APNsClient
import Crypto
import Foundation
import Relay
import RelayContract

/// Best of `rounds` rounds of the mean time per call, in microseconds (the minimum is the least disturbed
/// estimate on a shared machine).
func microsPerCall(rounds: Int = 20, _ body: () -> Void) -> Double {
    var iterations = 1
    let clock = ContinuousClock()
    while clock.measure({ for _ in 0..<iterations { body() } }) < .milliseconds(5) { iterations *= 2 }
    var best = Double.infinity
    for _ in 0..<rounds {
        let elapsed = clock.measure { for _ in 0..<iterations { body() } }
        best = min(best, elapsed.seconds * 1e6 / Double(iterations))
    }
    return best
}

/// Per-stage costs outside the pipeline: provider-token signing, offset-ledger operations, result encoding.
/// (Decoding and validation: `DecodeBenchmark`, run by `Benchmarks/end-to-end.sh` too.)
func stages() throws {
    say("== per stage (release, one thread)")

    // Provider token: a new signature each call (each call is a new rotation epoch; cached otherwise).
    let pem = P256.Signing.PrivateKey().pemRepresentation
    let signer = try ProviderTokenSigner(pem: pem, keyID: "BENCHKEY01", teamID: "BENCHTEAM1")
    var now: Int64 = 1_700_000_000
    var sink = 0
    let signMicros = microsPerCall(rounds: 5) {
        now += signer.epochSeconds
        sink &+= (try? signer.token(now: now).jwt.utf8.count) ?? 0
    }
    let cachedMicros = microsPerCall { sink &+= (try? signer.token(now: now).jwt.utf8.count) ?? 0 }
    let opensslSign = opensslSignMicros()
    say("provider token: \(f(signMicros, 1)) µs per new token (RFC 6979 deterministic ES256), \(f(cachedMicros, 3)) µs cached; openssl speed ecdsap256 sign \(opensslSign.map { f($0, 1) } ?? "n/a") µs")
    row("stage: provider token sign µs", f(signMicros, 1), floor: opensslSign.map { "openssl sign \(f($0, 1))" } ?? "", ratio: opensslSign.map { f(signMicros / $0, 2) } ?? "")

    // Offset ledger: begin + finish per event, in order and out of order (shuffled within windows of 1000,
    // as APNs answers out of order), on 16 partitions; floor: a Set insert + remove.
    let events = 100_000
    var orders: [(String, [Int64])] = [("in order", (0..<Int64(events)).map { $0 })]
    var generator = SystemRandomNumberGenerator()
    var shuffled: [Int64] = []
    for start in stride(from: 0, to: events, by: 1000) {
        shuffled += (Int64(start)..<Int64(min(start + 1000, events))).shuffled(using: &generator)
    }
    orders.append(("out of order (window 1000)", shuffled))
    for (name, finishOrder) in orders {
        let micros = microsPerCall(rounds: 5) {
            var ledger = OffsetLedger<Int>()
            var started: Int64 = 0
            for offset in finishOrder {
                // Begin everything up to this offset's window before finishing it, as a consumer would.
                while started <= offset {
                    ledger.begin(Int(started & 15), offset: started >> 4)
                    started += 1
                }
                sink &+= Int(ledger.finish(Int(offset & 15), offset: offset >> 4) ?? 0)
            }
        } / Double(events)
        let floor = microsPerCall(rounds: 5) {
            var set = Set<Int64>()
            for offset in finishOrder { set.insert(offset) }
            for offset in finishOrder { set.remove(offset) }
            sink &+= set.count
        } / Double(events)
        say("offset ledger, \(name): \(f(micros * 1000, 0)) ns per event (begin + finish); Set insert+remove \(f(floor * 1000, 0)) ns")
        row("stage: offset ledger ns/event, \(name)", f(micros * 1000, 0), floor: "Set ins+rm \(f(floor * 1000, 0))", ratio: f(micros / floor, 2))
    }

    // Result record encoding.
    let result = DeliveryResult(
        eventID: "evt-000123", metadata: Array(#"{"userId":42,"campaign":"spring"}"#.utf8), outcome: .delivered, status: 200,
        apnsID: "123E4567-E89B-12D3-A456-426614174000", apnsUniqueID: "a1b2c3d4-e5f6-7890-abcd-ef1234567890", attempts: 1,
        source: SourcePosition(topic: "apns-notifications", partition: 3, offset: 1_234_567), receivedAt: 1_767_139_200_000,
        completedAt: 1_767_139_200_042
    )
    let encodeMicros = microsPerCall { sink &+= result.jsonBytes().count }
    say("result record: \(f(encodeMicros, 2)) µs per record (\(result.jsonBytes().count) B)")
    row("stage: result record encode µs", f(encodeMicros, 2))
    // As the relay writes it: into one buffer reused for every record (`OutputRecords`), no allocation.
    var reused: [UInt8] = []
    let reusedMicros = microsPerCall {
        result.writeJSON(into: &reused)
        sink &+= reused.count
    }
    say("result record into a reused buffer: \(f(reusedMicros * 1000, 0)) ns per record")
    row("stage: result record encode into a reused buffer ns", f(reusedMicros * 1000, 0))
    if sink == 42 { print("") }
}

/// `openssl speed` ECDSA P-256 signing on this machine, µs per signature.
func opensslSignMicros() -> Double? {
    guard let (output, _) = try? runMeasured("openssl speed -seconds 2 ecdsap256 2>/dev/null") else { return nil }
    // "256 bits ecdsa (nistp256)   0.0000s   0.0001s  40000.0  12000.0": sign/s is the next-to-last column.
    guard let line = output.split(separator: "\n").last(where: { $0.contains("nistp256") && $0.contains("s ") }),
        let perSecond = line.split(separator: " ").dropLast().last.flatMap({ Double($0) }), perSecond > 0
    else { return nil }
    return 1e6 / perSecond
}
