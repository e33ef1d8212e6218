// Decode benchmark: microseconds per event for the fast path (simdjson, with and without the Swift
// rules), the reference validator (valijson, verdict only) and Foundation's JSONSerialization.
// Run: swift run -c release DecodeBenchmark
import CEventJSON
import Foundation
import Relay

/// A valid event of about `totalBytes`: the required fields (plus every optional one when `allFields`)
/// and an alert payload padded to size.
func event(totalBytes: Int, allFields: Bool) -> [UInt8] {
    var head = #"{"id":"evt-000123","deviceToken":"\#(String(repeating: "a1", count: 32))","topic":"com.example.app","#
        + #""pushType":"alert","#
    if allFields {
        head += #""priority":10,"expiration":1893456000,"collapseId":"score","#
            + #""apnsId":"123e4567-e89b-12d3-a456-426614174000","environment":"production","#
            + #""metadata":{"userId":42,"campaign":"spring"},"#
    }
    head += #""payload":{"aps":{"alert":{"title":"Hello","body":""#
    let tail = #""},"sound":"default","badge":1},"custom":[1,2,3]}}"#
    let filler = max(1, totalBytes - (head.utf8.count + tail.utf8.count))
    return Array((head + String(repeating: "x", count: filler) + tail).utf8)
}

/// The best of `rounds` rounds of the mean time per call, in microseconds (the machine is shared: the
/// minimum is the least disturbed estimate).
func measure(_ rounds: Int = 40, _ body: () -> Void) -> Double {
    var iterations = 1
    let clock = ContinuousClock()
    // Grow until one round takes at least 5 ms; many short rounds let the minimum dodge time slices
    // lost to other processes.
    while true {
        let elapsed = clock.measure { for _ in 0..<iterations { body() } }
        if elapsed >= .milliseconds(5) { break }
        iterations *= 2
    }
    var samples: [Double] = []
    for _ in 0..<rounds {
        let elapsed = clock.measure { for _ in 0..<iterations { body() } }
        let (seconds, attoseconds) = elapsed.components
        samples.append((Double(seconds) * 1e6 + Double(attoseconds) / 1e12) / Double(iterations))
    }
    return samples.min() ?? 0
}

guard let decoder = try? EventDecoder(), let reference = try? SchemaValidator.notificationEvent(),
    let raw = cej_decoder_create()
else {
    print("cannot create decoders")
    exit(1)
}
defer { cej_decoder_destroy(raw) }

print("simdjson: stage 1 runs the CPU's kernel (runtime dispatch): \(String(cString: cej_simdjson_implementation())); on-demand iteration compiled for \(String(cString: cej_ondemand_implementation()))")
print("")
let header = ["event", "simdjson fields", "fast path + rules", "valijson", "JSONSerialization"]
print(header.map { $0.padding(toLength: 19, withPad: " ", startingAt: 0) }.joined(separator: "| "))
print(String(repeating: "-", count: 19 * header.count + 2 * (header.count - 1)))

var sink = 0
for (size, allFields) in [(300, false), (300, true), (4096, true)] {
    let bytes = event(totalBytes: size, allFields: allFields)
    precondition((try? decoder.decode(bytes)) != nil && reference.isValid(bytes), "benchmark event must be valid")
    let data = Data(bytes)
    let rawMicros = bytes.withUnsafeBytes { buffer in
        measure {
            var out = cej_event()
            sink &+= Int(cej_decode_event(raw, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count, &out))
        }
    }
    let fastMicros = measure { sink &+= (try? decoder.decode(bytes))?.payload.count ?? 0 }
    let referenceMicros = measure { sink &+= reference.isValid(bytes) ? 1 : 0 }
    let foundationMicros = measure {
        sink &+= ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?.count ?? 0
    }
    let row = ["\(bytes.count) B" + (allFields ? ", all fields" : "")] + [rawMicros, fastMicros, referenceMicros, foundationMicros].map {
        String(format: "%.2f µs", $0)
    }
    print(row.map { $0.padding(toLength: 19, withPad: " ", startingAt: 0) }.joined(separator: "| "))
}
if sink == 42 { print("") }
