import CEventJSON

/// What can still be read from an event the decoder refused, so that its result record can echo the
/// producer's `id` and `metadata` (see `Schemas/delivery-result.schema.json`).
package struct SalvagedEvent: Hashable, Sendable {
    /// The top-level `id` when it is a JSON string (not checked against the schema).
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
        self.id = id.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: idLength), as: UTF8.self) }
        self.metadata = metadata.map { Array(UnsafeRawBufferPointer(start: $0, count: metadataLength)) }
    }

    /// Best effort: empty when `bytes` is not a JSON object.
    package init(salvaging bytes: [UInt8]) {
        self.init(salvaging: bytes[...])
    }

    package init(salvaging bytes: ArraySlice<UInt8>) {
        self = bytes.withUnsafeBytes { SalvagedEvent(salvaging: $0) }
    }
}
