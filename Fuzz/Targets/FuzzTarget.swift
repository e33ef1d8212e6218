/// The fuzz targets, named as `make fuzz` and the corpus folders (`Fuzz/corpus/<name>`) name them.
///
/// `run` is the one entry of each: the libFuzzer drivers (Fuzz/Drivers) and the corpus replay in `make test`
/// (Tests/FuzzCorpusTests) both call it, so the replay runs exactly what was fuzzed. An input either returns or
/// stops the process: a crash, a sanitizer report, or a broken guarantee the target checks (a `precondition`,
/// or an `abort` in the C++ one) — each is a bug to fix in the code under test, never in the target.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// CEventJSON's C API: the fast decoder, the reference validator (verdict and detailed pass), salvage.
    case eventJSON = "event-json"
    /// `EventDecoder` (simdjson + the Swift schema rules) against `SchemaValidator`: the same verdict on every input.
    case eventDecoder = "event-decoder"
    /// The configuration loader: a file (YAML or JSON), `APNS_RELAY_*` variables and `--set` items.
    case configuration
    /// An APNs answer: `:status` and the other headers, then the body (`{"reason":…}`).
    case apnsAnswer = "apns-answer"

    /// Runs one input through the target.
    package func run(_ input: [UInt8]) async {
        switch self {
        case .eventJSON: EventJSONTarget.run(input)
        case .eventDecoder: EventDecoderTarget.run(input)
        case .configuration: await ConfigurationTarget.run(input)
        case .apnsAnswer: APNsAnswerTarget.run(input)
        }
    }
}
