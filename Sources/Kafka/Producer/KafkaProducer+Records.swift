import CRdKafka
import Glibc

/// The one `rd_kafka_produceva` call every `produce` comes to: a record's items (topic, partition, key, value,
/// flags, timestamp, opaque, headers) on the stack, borrowed for the call (librdkafka copies them).
extension KafkaProducer {
    /// Builds the rd_kafka_vu_t list and calls rd_kafka_produceva (the variadic producev does not import).
    /// - Returns: an owned `rd_kafka_error_t` on failure.
    static func produce(
        handle: OpaquePointer, topic: String, partition: Int32?, key: ArraySlice<UInt8>?, value: [UInt8]?,
        headers: [KafkaHeader], timestampMilliseconds: Int64?, opaque: UnsafeMutableRawPointer
    ) -> OpaquePointer? {
        withOptionalBytes(key) { keyPointer, keyCount in
            withOptionalBytes(value) { valuePointer, valueCount in
                topic.withCString { topicName in
                    // Header names must outlive the call; librdkafka copies names and values.
                    let names = headers.map { strdup($0.name) }
                    defer { names.forEach { free($0) } }
                    // On the stack: at most seven items besides the headers.
                    return withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 7 + headers.count) { storage in
                    var items = ItemList(storage)
                    var item = rd_kafka_vu_t()
                    item.vtype = RD_KAFKA_VTYPE_TOPIC
                    item.u.cstr = topicName
                    items.append(item)
                    item = rd_kafka_vu_t()
                    item.vtype = RD_KAFKA_VTYPE_PARTITION
                    item.u.i32 = partition ?? crdkafka_partition_unassigned()
                    items.append(item)
                    if let keyPointer {
                        item = rd_kafka_vu_t()
                        item.vtype = RD_KAFKA_VTYPE_KEY
                        item.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyPointer)
                        item.u.mem.size = keyCount
                        items.append(item)
                    }
                    if let valuePointer {
                        item = rd_kafka_vu_t()
                        item.vtype = RD_KAFKA_VTYPE_VALUE
                        item.u.mem.ptr = UnsafeMutableRawPointer(mutating: valuePointer)
                        item.u.mem.size = valueCount
                        items.append(item)
                    }
                    item = rd_kafka_vu_t()
                    item.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    item.u.i = crdkafka_msg_flag_copy()
                    items.append(item)
                    if let timestampMilliseconds {
                        item = rd_kafka_vu_t()
                        item.vtype = RD_KAFKA_VTYPE_TIMESTAMP
                        item.u.i64 = timestampMilliseconds
                        items.append(item)
                    }
                    item = rd_kafka_vu_t()
                    item.vtype = RD_KAFKA_VTYPE_OPAQUE
                    item.u.ptr = opaque
                    items.append(item)
                    // Header values: borrow each one for the duration of the call.
                    return withHeaderValues(headers[...]) { values in
                        for (index, name) in names.enumerated() {
                            item = rd_kafka_vu_t()
                            item.vtype = RD_KAFKA_VTYPE_HEADER
                            item.u.header.name = UnsafePointer(name)
                            item.u.header.val = values[index].pointer
                            // A NULL value makes a null header; the size is then ignored.
                            item.u.header.size = values[index].count
                            items.append(item)
                        }
                        return rd_kafka_produceva(handle, storage.baseAddress, items.count)
                    }
                    }
                }
            }
        }
    }
}

/// The items of one `rd_kafka_produceva` call, appended into stack storage sized by the caller.
private struct ItemList {
    let storage: UnsafeMutableBufferPointer<rd_kafka_vu_t>
    private(set) var count = 0
    init(_ storage: UnsafeMutableBufferPointer<rd_kafka_vu_t>) { self.storage = storage }
    mutating func append(_ item: rd_kafka_vu_t) {
        storage.initializeElement(at: count, to: item)
        count += 1
    }
}

/// Empty buffers still need a non-NULL pointer, or librdkafka would send a null key/value.
// Never written to, only passed as a non-NULL address for zero bytes.
nonisolated(unsafe) private let emptyBytePlaceholder: UnsafeMutableRawPointer = .allocate(byteCount: 1, alignment: 1)

private func withOptionalBytes<T>(_ bytes: [UInt8]?, _ body: (UnsafeRawPointer?, Int) -> T) -> T {
    withOptionalBytes(bytes?[...], body)
}

private func withOptionalBytes<T>(_ bytes: ArraySlice<UInt8>?, _ body: (UnsafeRawPointer?, Int) -> T) -> T {
    guard let bytes else { return body(nil, 0) }
    return bytes.withUnsafeBytes { buffer in
        body(buffer.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(emptyBytePlaceholder), buffer.count)
    }
}

private func withHeaderValues<T>(
    _ headers: ArraySlice<KafkaHeader>, _ pointers: [(pointer: UnsafeRawPointer?, count: Int)] = [],
    _ body: ([(pointer: UnsafeRawPointer?, count: Int)]) -> T
) -> T {
    guard let first = headers.first else { return body(pointers) }
    return withOptionalBytes(first.value) { pointer, count in
        withHeaderValues(headers.dropFirst(), pointers + [(pointer, count)], body)
    }
}
