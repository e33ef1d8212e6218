import CEventJSON

/// What can still be read from an event the decoder refused, so that its result record can echo the
/// producer's `id` and `metadata` (see `Schemas/delivery-result.schema.json`).
package struct SalvagedEvent: Hashable, Sendable {
    /// The top-level `id` when it is a JSON string (not checked against the schema otherwise), at most
    /// `maxIDCharacters`: a longer one is cut and ends with `…` (see `boundedID(_:)`).
    package var id: String?
    /// The top-level `metadata` when it is an object, re-serialised compactly (not the original bytes).
    package var metadata: [UInt8]?

    package init(id: String? = nil, metadata: [UInt8]? = nil) {
        self.id = id
        self.metadata = metadata
    }

    /// Best effort: empty when `bytes` is not a JSON object. Slow path (nlohmann); for refused events only.
    package init(salvaging bytes: UnsafeRawBufferPointer) {
        var id: UnsafeMutablePointer<CChar>?
        var idLength = 0
        var metadata: UnsafeMutablePointer<CChar>?
        var metadataLength = 0
        cej_salvage_event(
            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
            &id, &idLength, &metadata, &metadataLength)
        defer {
            cej_free(id)
            cej_free(metadata)
        }
        self.id = id.map { Self.boundedID(String(decoding: UnsafeRawBufferPointer(start: $0, count: idLength), as: UTF8.self)) }
        self.metadata = metadata.map { Array(UnsafeRawBufferPointer(start: $0, count: metadataLength)) }
    }

    /// The most of a salvaged id a result echoes: the schema's limit on an event's `id` and on a result's
    /// (256 characters, counted in Unicode scalars as JSON Schema counts). An id the schema accepts is echoed
    /// whole; a producer could otherwise make every refused event's result (and its key) as large as the event.
    package static let maxIDCharacters = EventRules.maxIDCharacters

    /// `id`, or its first `maxIDCharacters - 1` characters and `…` (U+2026) when it is longer, saying it was cut.
    static func boundedID(_ id: String) -> String {
        let scalars = id.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: maxIDCharacters, limitedBy: scalars.endIndex),
            end != scalars.endIndex
        else { return id }
        let kept = scalars.index(scalars.startIndex, offsetBy: maxIDCharacters - 1)
        return String(scalars[..<kept]) + "…"
    }

    /// Best effort: empty when `bytes` is not a JSON object.
    package init(salvaging bytes: [UInt8]) {
        self.init(salvaging: bytes[...])
    }

    package init(salvaging bytes: ArraySlice<UInt8>) {
        self = bytes.withUnsafeBytes { SalvagedEvent(salvaging: $0) }
    }
}
