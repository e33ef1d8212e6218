import CRdKafka
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One record received by a ``KafkaConsumer``. Key and value are copied out of librdkafka's buffers, into
/// one array (the value first, then the key: one allocation per record), and are slices of it; either may
/// be `nil` (a null key or a tombstone is data, not an error). The value's indices start at 0.
package struct KafkaConsumerMessage: Sendable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var key: ArraySlice<UInt8>?
    package var value: ArraySlice<UInt8>?
    package var headers: [KafkaHeader]
    /// Milliseconds since the epoch, when the broker or producer set one.
    package var timestampMilliseconds: Int64?
    /// The lane its topic is read in (``KafkaConsumerConfiguration/urgentTopics``).
    package var lane: KafkaConsumerLane = .bulk
    /// Which assignment of its partition it was received under (stamped by the consumer): a message put back
    /// after its partition was lost and assigned again belongs to the old one and is dropped.
    var assignmentEpoch: UInt32 = 0
    /// The headers the record had beyond ``KafkaConsumerConfiguration/headerLimits``, which were not copied:
    /// their count and bytes (names and values). A record has any only when its producer sent more than the
    /// limits allow; an application refuses it rather than act on part of its headers.
    package var headersLeftOut = HeadersLeftOut()

    package struct HeadersLeftOut: Sendable, Hashable {
        package var count = 0
        package var bytes = 0
        package init() {}
    }

    /// What the record holds of memory while it waits in the consumer's buffer or the application: its bytes
    /// (key, value, header names and values) and what each header and the record cost beyond them (the
    /// objects that hold them). An estimate that errs high, for byte bounds: a record with many small headers
    /// costs more than its bytes say.
    package var footprint: Int {
        var bytes = Self.recordOverhead + (key?.count ?? 0) + (value?.count ?? 0)
        for header in headers { bytes += Self.headerOverhead + header.name.utf8.count + (header.value?.count ?? 0) }
        return bytes
    }

    /// A header's objects: its name (a String with storage, above 15 bytes) and its value's array, each a heap
    /// allocation with its header, rounded up by malloc; the `KafkaHeader` in the record's header array.
    package static let headerOverhead = 128
    /// The record's own: the array that holds key and value, the header array, its slot in a buffer, the topic.
    package static let recordOverhead = 256

    package var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }

    @_disfavoredOverload
    package init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
                headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil, lane: KafkaConsumerLane = .bulk) {
        self.init(topic: topic, partition: partition, offset: offset, key: key?[...], value: value?[...], headers: headers,
                  timestampMilliseconds: timestampMilliseconds, lane: lane)
    }

    package init(topic: String, partition: Int32, offset: Int64, key: ArraySlice<UInt8>?, value: ArraySlice<UInt8>?,
                headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil, lane: KafkaConsumerLane = .bulk) {
        self.lane = lane
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// Copies a message librdkafka still owns (the caller destroys it).
    /// - Parameter topicName: the Swift name of the message's topic handle, cached by the caller so that
    ///   a long topic name is not allocated once per record.
    /// - Parameter headerLimits: how many headers, and how many of their bytes, are copied; the rest are
    ///   counted in ``headersLeftOut`` (each header is an object or two: a producer's thousands of tiny headers
    ///   would cost far more memory than their bytes).
    init(copying message: UnsafePointer<rd_kafka_message_t>, lane: KafkaConsumerLane, headerLimits: KafkaConsumerConfiguration.HeaderLimits,
         topicName: (OpaquePointer) -> String) {
        let raw = message.pointee
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        // Fields from locals, each set once: an initializer that reads back what it set copies the record.
        var headers: [KafkaHeader] = []
        var leftOut = HeadersLeftOut()
        var headerList: OpaquePointer?
        // Ownership: the header list belongs to the message; we only read it.
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            var copiedBytes = 0
            while rd_kafka_header_get_all(headerList, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                index += 1
                let bytes = (name.map { strlen($0) } ?? 0) + (value == nil ? 0 : size)
                // Once one header is left out, every later one is too: what is copied is a prefix.
                guard leftOut.count == 0, headers.count < headerLimits.count, copiedBytes + bytes <= headerLimits.bytes else {
                    leftOut.count += 1
                    leftOut.bytes += bytes
                    continue
                }
                copiedBytes += bytes
                headers.append(KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: value.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: size)) }))
            }
        }
        // Value, then key, in one array.
        let valueCount = raw.payload == nil ? 0 : raw.len
        let keyCount = raw.key == nil ? 0 : raw.key_len
        let bytes = [UInt8](unsafeUninitializedCapacity: valueCount + keyCount) { buffer, initialized in
            if let payload = raw.payload, valueCount > 0 {
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(start: payload, count: valueCount))
            }
            if let key = raw.key, keyCount > 0 {
                UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[valueCount...])
                    .copyMemory(from: UnsafeRawBufferPointer(start: key, count: keyCount))
            }
            initialized = valueCount + keyCount
        }
        self.init(
            topic: raw.rkt.map(topicName) ?? "", partition: raw.partition, offset: raw.offset,
            key: raw.key == nil ? nil : bytes[valueCount...],
            value: raw.payload == nil ? nil : bytes[..<valueCount],
            headers: headers, timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp,
            lane: lane)
        self.headersLeftOut = leftOut
    }
}

/// The two lanes a consumer reads in. Records of ``KafkaConsumerConfiguration/urgentTopics`` are fetched
/// into a queue of their own, buffered apart and handed to the application before any bulk record; the
/// application can hold either lane (``KafkaConsumer/hold(_:)``) without holding up the other.
package enum KafkaConsumerLane: Int, Sendable, Hashable, CaseIterable {
    case urgent = 0
    case bulk = 1
}
