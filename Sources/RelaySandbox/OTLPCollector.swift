import Foundation
import Relay
import ServiceSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An OpenTelemetry collector for the tests and benchmarks: an HTTP/1.1 server on 127.0.0.1 that takes
/// OTLP/HTTP trace exports (`POST /v1/traces`, protobuf) and decodes their spans with a protobuf reader of
/// its own, so a check does not rest on the exporter's generated code. Answers every export 200 with an
/// empty response. `keepsSpans: false` only counts them (a sink for benchmarks).
package final class OTLPCollector: Sendable {
    package let port: Int
    private let keepsSpans: Bool
    private let exports = Atomic<Int>(0)
    private let spanTotal = Atomic<Int>(0)
    private let listener: Int32
    private let received = BlockingMutex<[ExportedSpan]>([])
    private let requests = BlockingMutex<[String]>([])
    private let stopped = Flag()

    package init(keepsSpans: Bool = true) throws {
        self.keepsSpans = keepsSpans
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RelayError("socket: errno \(errno)") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw RelayError("bind/listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Every span received so far.
    package var spans: [ExportedSpan] { received.withLock { $0 } }
    /// The request lines received (`POST /v1/traces HTTP/1.1`).
    package var requestLines: [String] { requests.withLock { $0 } }
    /// Exports received, and the spans in them.
    package var exportCount: Int { exports.load(ordering: .relaxed) }
    package var spanCount: Int { spanTotal.load(ordering: .relaxed) }

    /// Stops listening (the port then refuses connections); again, does nothing.
    package func stop() {
        guard stopped.setOnce() else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while !stopped.isSet {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !stopped.isSet {
            // Headers.
            var headerEnd: Int?
            while headerEnd == nil {
                if let end = Self.find([13, 10, 13, 10], in: buffer) { headerEnd = end; break }
                let n = read(connection, &chunk, chunk.count)
                guard n > 0 else { return }
                buffer += chunk[0..<n]
            }
            let head = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            if keepsSpans { requests.withLock { $0.append(lines.first ?? "") } }
            let contentLength = lines.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
            let bodyStart = headerEnd! + 4
            while buffer.count < bodyStart + contentLength {
                let n = read(connection, &chunk, chunk.count)
                guard n > 0 else { return }
                buffer += chunk[0..<n]
            }
            let body = Array(buffer[bodyStart..<(bodyStart + contentLength)])
            let spans = (try? ExportedSpan.decode(exportRequest: body)) ?? []
            spanTotal.add(spans.count, ordering: .relaxed)
            if keepsSpans { received.withLock { $0 += spans } }
            buffer.removeFirst(bodyStart + contentLength)
            exports.add(1, ordering: .relaxed)
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n".utf8)
            guard write(connection, answer, answer.count) == answer.count else { return }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

/// A span as an OTLP export carries it (the fields the tests look at).
package struct ExportedSpan: Sendable, CustomStringConvertible {
    package enum Value: Sendable, Equatable {
        case string(String), int(Int64), bool(Bool), double(Double)
    }

    package var traceID: [UInt8] = []
    package var spanID: [UInt8] = []
    package var parentSpanID: [UInt8] = []
    package var name = ""
    /// OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    package var kind = 0
    package var attributes: [String: Value] = [:]
    package var links: [(traceID: [UInt8], spanID: [UInt8])] = []

    package var description: String { "\(name) trace \(traceID.hex) span \(spanID.hex) parent \(parentSpanID.hex) \(attributes)" }

    package func string(_ key: String) -> String? {
        if case .string(let value) = attributes[key] { return value }
        return nil
    }

    package func int(_ key: String) -> Int64? {
        if case .int(let value) = attributes[key] { return value }
        return nil
    }

    /// Decodes an `ExportTraceServiceRequest` (opentelemetry/proto/collector/trace/v1).
    package static func decode(exportRequest bytes: [UInt8]) throws -> [ExportedSpan] {
        var spans: [ExportedSpan] = []
        var request = ProtobufReader(bytes[...])
        while let (field, value) = try request.next() {
            guard field == 1, case .bytes(let resourceSpans) = value else { continue }  // resource_spans
            var resource = ProtobufReader(resourceSpans)
            while let (field, value) = try resource.next() {
                guard field == 2, case .bytes(let scopeSpans) = value else { continue }  // scope_spans
                var scope = ProtobufReader(scopeSpans)
                while let (field, value) = try scope.next() {
                    guard field == 2, case .bytes(let span) = value else { continue }  // spans
                    spans.append(try ExportedSpan(span))
                }
            }
        }
        return spans
    }

    private init(_ bytes: ArraySlice<UInt8>) throws {
        var reader = ProtobufReader(bytes)
        while let (field, value) = try reader.next() {
            switch (field, value) {
            case (1, .bytes(let id)): traceID = Array(id)
            case (2, .bytes(let id)): spanID = Array(id)
            case (4, .bytes(let id)): parentSpanID = Array(id)
            case (5, .bytes(let text)): name = String(decoding: text, as: UTF8.self)
            case (6, .varint(let value)): kind = Int(value)
            case (9, .bytes(let keyValue)):
                let (key, value) = try Self.keyValue(keyValue)
                if let value { attributes[key] = value }
            case (13, .bytes(let link)):
                var linkReader = ProtobufReader(link)
                var linked: (traceID: [UInt8], spanID: [UInt8]) = ([], [])
                while let (field, value) = try linkReader.next() {
                    if field == 1, case .bytes(let id) = value { linked.traceID = Array(id) }
                    if field == 2, case .bytes(let id) = value { linked.spanID = Array(id) }
                }
                links.append(linked)
            default: break
            }
        }
    }

    private static func keyValue(_ bytes: ArraySlice<UInt8>) throws -> (String, Value?) {
        var reader = ProtobufReader(bytes)
        var key = ""
        var result: Value?
        while let (field, value) = try reader.next() {
            if field == 1, case .bytes(let text) = value { key = String(decoding: text, as: UTF8.self) }
            if field == 2, case .bytes(let anyValue) = value {
                var any = ProtobufReader(anyValue)
                while let (field, value) = try any.next() {
                    switch (field, value) {
                    case (1, .bytes(let text)): result = .string(String(decoding: text, as: UTF8.self))
                    case (2, .varint(let flag)): result = .bool(flag != 0)
                    case (3, .varint(let number)): result = .int(Int64(bitPattern: number))
                    case (4, .fixed64(let bits)): result = .double(Double(bitPattern: bits))
                    default: break
                    }
                }
            }
        }
        return (key, result)
    }
}

/// Protobuf's wire format, read field by field.
struct ProtobufReader {
    enum Value {
        case varint(UInt64), fixed64(UInt64), bytes(ArraySlice<UInt8>), fixed32(UInt32)
    }

    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    mutating func next() throws -> (Int, Value)? {
        guard !bytes.isEmpty else { return nil }
        let tag = try varint()
        let field = Int(tag >> 3)
        switch tag & 7 {
        case 0: return (field, .varint(try varint()))
        case 1: return (field, .fixed64(try fixed(8)))
        case 2:
            let length = Int(try varint())
            guard bytes.count >= length else { throw RelayError("protobuf: truncated field \(field)") }
            let value = bytes.prefix(length)
            bytes = bytes.dropFirst(length)
            return (field, .bytes(value))
        case 5: return (field, .fixed32(UInt32(try fixed(4))))
        default: throw RelayError("protobuf: wire type \(tag & 7) of field \(field)")
        }
    }

    private mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = bytes.popFirst() {
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw RelayError("protobuf: truncated varint")
    }

    private mutating func fixed(_ count: Int) throws -> UInt64 {
        guard bytes.count >= count else { throw RelayError("protobuf: truncated fixed field") }
        var value: UInt64 = 0
        for (index, byte) in bytes.prefix(count).enumerated() { value |= UInt64(byte) << (8 * UInt64(index)) }
        bytes = bytes.dropFirst(count)
        return value
    }
}

extension Array where Element == UInt8 {
    package var hex: String { map { String(format: "%02x", $0) }.joined() }
}
