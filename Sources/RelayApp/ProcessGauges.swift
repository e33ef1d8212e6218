import Metrics

#if canImport(Glibc)
import CMalloc
import Glibc
#endif

/// The process's own resources as gauges, read at each scrape: what a leak watch and a dashboard need
/// (resident memory, the heap the allocator has handed out against what it keeps, file descriptors,
/// threads). swift-prometheus exports none of these itself; the `process_*` names are Prometheus' usual ones.
///
/// The heap figures come from glibc's `mallinfo2()` and tell a leak (heap in use grows) from allocator
/// retention (RSS grows, heap in use does not: freed memory the allocator keeps for reuse).
package struct ProcessGauges: Sendable {
    private let resident = Gauge(label: "process_resident_memory_bytes")
    private let openFileDescriptors = Gauge(label: "process_open_fds")
    private let threads = Gauge(label: "process_threads")
    private let heapInUse = Gauge(label: "apns_relay_heap_in_use_bytes")
    private let heapFree = Gauge(label: "apns_relay_heap_free_bytes")

    package init() {}

    /// Reads /proc/self and the allocator's statistics and records them. Cheap (a few small reads): meant
    /// to run once per scrape.
    package func update() {
        let sample = ProcessSample.current()
        if let bytes = sample.residentBytes { resident.record(bytes) }
        if let count = sample.openFileDescriptors { openFileDescriptors.record(count) }
        if let count = sample.threads { threads.record(count) }
        if let heap = sample.heap {
            heapInUse.record(heap.inUse)
            heapFree.record(heap.free)
        }
    }
}

/// One reading of the process's resources; `nil` where the platform has no source for it.
package struct ProcessSample: Sendable {
    package var residentBytes: Int?
    package var openFileDescriptors: Int?
    package var threads: Int?
    /// Bytes the allocator has handed out (small chunks and mmapped blocks) and bytes it holds free.
    package var heap: (inUse: Int, free: Int)?

    package static func current() -> ProcessSample {
        var sample = ProcessSample()
        #if os(Linux)
        // /proc/self/statm: sizes in pages; the second field is the resident set.
        if let statm = readSmallFile("/proc/self/statm") {
            let fields = statm.split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) { sample.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        if let status = readSmallFile("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }),
            let count = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).last.flatMap({ Int($0) })
        {
            sample.threads = count
        }
        sample.openFileDescriptors = countEntries("/proc/self/fd")
        let info = mallinfo2()
        sample.heap = (inUse: Int(info.uordblks) + Int(info.hblkhd), free: Int(info.fordblks))
        #endif
        return sample
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var length = 0
        while length < buffer.count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + length, $0.count - length) }
            if n <= 0 { break }
            length += n
        }
        return String(decoding: buffer[..<length], as: UTF8.self)
    }

    /// Entries of a directory, less `.` and `..` (the descriptor `opendir` itself holds is counted too:
    /// one, as in every process's own count).
    private static func countEntries(_ path: String) -> Int? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var count = 0
        // The name is read in place, a byte at a time: glibc sizes an entry to its name (d_reclen), so copying
        // `pointee` (the whole 256-byte d_name) can read past the end of readdir's buffer.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(directory) {
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: UInt8.self)
            let isDot = name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            if !isDot { count += 1 }
        }
        return count - 1
    }
}
