#if canImport(Glibc)
import CMalloc
import Glibc
#endif

/// glibc's allocator, set for a long-running service whose largest buffers come and go: librdkafka's fetch
/// responses (up to `fetch.max.bytes`, 2 MiB by default) are held while their records wait, then freed.
///
/// When the heap has no free room for an allocation of `M_MMAP_THRESHOLD` bytes or more, glibc gives it pages
/// of its own, returned to the system when it is freed, instead of growing the heap. By default that
/// threshold moves: each such block freed raises it to the block's size (up to 32 MiB), so after the first
/// fetch responses the heap grows to hold them, and what it grew by stays resident. A fixed threshold keeps
/// them out: 1M events on 128 partitions peaked at 96.5 MiB RSS against 104.4 (Benchmarks/README.md, issue
/// #39), at the same CPU per event. Each such block costs an `mmap` and a `munmap`: a few microseconds per
/// fetch response of thousands of records.
package enum AllocatorSettings {
    /// Allocations from this size up that the heap has no free room for get pages of their own.
    package static let mmapThreshold = 256 * 1024

    /// Fixes glibc's mmap threshold at ``mmapThreshold``, unless the operator set `MALLOC_MMAP_THRESHOLD_`
    /// (glibc read it at start; it wins). Returns whether it was set. Call once, early in `run`.
    @discardableResult
    package static func apply(environment: [String: String]) -> Bool {
        #if canImport(Glibc)
        guard environment["MALLOC_MMAP_THRESHOLD_"] == nil else { return false }
        return mallopt(M_MMAP_THRESHOLD, Int32(mmapThreshold)) == 1
        #else
        return false
        #endif
    }
}
