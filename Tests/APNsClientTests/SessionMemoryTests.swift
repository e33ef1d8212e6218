import CNGHTTP2Memory
import Testing

/// The block pool behind every nghttp2 session (`cnghttp2_pool`, the session's `nghttp2_mem`). Each test
/// owns its pool; sizes are chosen against the pool's classes (powers of two from 32 bytes to 4 KiB).
@Suite("An nghttp2 session's block pool")
struct SessionMemoryTests {
    private final class Pool {
        let pool: OpaquePointer
        var raw: UnsafeMutableRawPointer { UnsafeMutableRawPointer(pool) }
        init(cap: Int) { pool = cnghttp2_pool_new(cap)! }
        deinit { cnghttp2_pool_delete(pool) }
        var stats: cnghttp2_pool_stats {
            var stats = cnghttp2_pool_stats()
            cnghttp2_pool_get_stats(pool, &stats)
            return stats
        }
        func malloc(_ size: Int) -> UnsafeMutableRawPointer { cnghttp2_pool_malloc(size, raw)! }
        func free(_ block: UnsafeMutableRawPointer?) { cnghttp2_pool_free(block, raw) }
    }

    @Test func aFreedBlockServesTheNextRequestOfItsClassWithoutMalloc() {
        let pool = Pool(cap: 1 << 20)
        let first = pool.malloc(100)
        pool.free(first)
        #expect(pool.stats.cached_bytes == 128)
        let second = pool.malloc(120)  // the same 128-byte class
        #expect(second == first)
        let other = pool.malloc(200)   // the 256-byte class: its list is empty
        #expect(other != first)
        let stats = pool.stats
        #expect(stats.served == 3)
        #expect(stats.from_malloc == 2)
        #expect(stats.outstanding == 2)
        #expect(stats.cached_bytes == 0)
        pool.free(second)
        pool.free(other)
        #expect(pool.stats.outstanding == 0)
    }

    @Test func eachSizeGetsTheSmallestClassThatHoldsIt() {
        // (requested size, its class): a freed block of the class serves every size up to it, none above.
        for (size, classSize) in [(1, 32), (32, 32), (33, 64), (64, 64), (65, 128), (2048, 2048), (2049, 4096), (4096, 4096)] {
            let pool = Pool(cap: 1 << 20)
            let block = pool.malloc(size)
            pool.free(block)
            #expect(pool.stats.cached_bytes == classSize, "\(size) bytes")
            let same = pool.malloc(classSize)
            #expect(same == block, "\(size) bytes: a \(classSize)-byte request reuses its block")
            pool.free(same)
            if classSize < 4096 {
                let bigger = pool.malloc(classSize + 1)
                #expect(bigger != block, "\(size) bytes: a \(classSize + 1)-byte request needs the next class")
                pool.free(bigger)
            }
        }
    }

    @Test func blocksAreAlignedForAnyType() {
        let pool = Pool(cap: 1 << 20)
        let blocks = [1, 31, 32, 33, 500, 4096, 4097, 100_000].map { pool.malloc($0) }
        for block in blocks { #expect(Int(bitPattern: block) % 16 == 0) }
        for block in blocks { pool.free(block) }
    }

    @Test func callocZeroesAReusedBlock() {
        let pool = Pool(cap: 1 << 20)
        let dirty = pool.malloc(64)
        dirty.initializeMemory(as: UInt8.self, repeating: 0xFF, count: 64)
        pool.free(dirty)
        let clean = cnghttp2_pool_calloc(8, 8, pool.raw)!
        #expect(clean == dirty)
        #expect(UnsafeRawBufferPointer(start: clean, count: 64).allSatisfy { $0 == 0 })
        pool.free(clean)
        #expect(cnghttp2_pool_calloc(Int.max / 2, 4, pool.raw) == nil, "an overflowing count × size is refused")
    }

    @Test func reallocKeepsTheBlockWhileItFitsAndItsBytesWhenItMoves() {
        let pool = Pool(cap: 1 << 20)
        let block = pool.malloc(40)  // the 64-byte class
        for i in 0..<40 { block.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
        #expect(cnghttp2_pool_realloc(block, 64, pool.raw) == block, "64 bytes still fit its class")
        let moved = cnghttp2_pool_realloc(block, 5000, pool.raw)!  // past the largest class
        #expect((0..<40).allSatisfy { moved.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
        #expect(pool.stats.cached_bytes == 64, "the old block went back to its list")
        let movedAgain = cnghttp2_pool_realloc(moved, 9000, pool.raw)!
        #expect((0..<40).allSatisfy { movedAgain.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
        #expect(cnghttp2_pool_realloc(movedAgain, 0, pool.raw) == nil, "size 0 frees, as realloc does")
        #expect(pool.stats.outstanding == 0)
        let fresh = cnghttp2_pool_realloc(nil, 10, pool.raw)
        #expect(fresh != nil, "a null block is a malloc")
        #expect(pool.stats.outstanding == 1)
        pool.free(fresh)
    }

    @Test func freeBlocksAreKeptUpToTheCapAndLargeOnesNever() {
        let pool = Pool(cap: 256)
        let blocks = (0..<3).map { _ in pool.malloc(128) }
        for block in blocks { pool.free(block) }
        #expect(pool.stats.cached_bytes == 256, "two 128-byte blocks kept, the third returned to malloc")
        let large = pool.malloc(4097)
        pool.free(large)
        #expect(pool.stats.cached_bytes == 256, "blocks over 4 KiB are never kept")
        let again = (0..<3).map { _ in pool.malloc(128) }
        #expect(pool.stats.from_malloc == 5, "3 blocks, the large one, then the one the cap returned")
        #expect(pool.stats.cached_bytes == 0)
        for block in again { pool.free(block) }
    }
}
