import ServiceSupport
import Testing

@Suite struct ByteBufferPoolTests {
    private static func buffer(_ byte: UInt8, capacity: Int) -> [UInt8] {
        var buffer = [UInt8]()
        buffer.reserveCapacity(capacity)
        buffer.append(byte)
        return buffer
    }

    /// Oldest first: the buffer given back longest ago is the one least likely to be still shared.
    @Test func buffersAreTakenInTheOrderTheyWereGiven() {
        let pool = ByteBufferPool(kept: 4, largestKept: 1024)
        #expect(pool.take().isEmpty && pool.count == 0, "an empty pool hands out a new, empty buffer")
        pool.give(Self.buffer(1, capacity: 64))
        pool.give(Self.buffer(2, capacity: 64))
        #expect(pool.take() == [1])
        #expect(pool.take() == [2])
    }

    @Test func thePoolKeepsAtMostItsBoundAndNothingTooLargeOrEmpty() {
        let pool = ByteBufferPool(kept: 2, largestKept: 1024)
        pool.give([])
        #expect(pool.count == 0, "a buffer without capacity is not worth keeping")
        pool.give(Self.buffer(1, capacity: 4096))
        #expect(pool.count == 0, "a buffer grown beyond largestKept is dropped")
        for byte in UInt8(1)...3 { pool.give(Self.buffer(byte, capacity: 64)) }
        #expect(pool.count == 2)
        #expect(pool.take() == [1] && pool.take() == [2], "the third was dropped, not the first")
    }

    /// `withBuffer` lends an emptied buffer and gets the same memory back, also when its body throws.
    @Test func withBufferLendsAnEmptiedBufferAndTakesItBack() throws {
        struct Refused: Error {}
        let pool = ByteBufferPool(kept: 1, largestKept: 1024)
        pool.give(Self.buffer(9, capacity: 200))
        let address = pool.withBuffer { buffer in
            #expect(buffer.isEmpty && buffer.capacity >= 200, "emptied, its capacity kept")
            buffer.append(contentsOf: [1, 2, 3])
            return buffer.withUnsafeBufferPointer { $0.baseAddress }
        }
        #expect(pool.count == 1)
        #expect(throws: Refused.self) {
            try pool.withBuffer { (buffer: inout [UInt8]) throws(Refused) in
                #expect(buffer.withUnsafeBufferPointer { $0.baseAddress } == address, "the same memory again")
                throw Refused()
            }
        }
        #expect(pool.count == 1, "given back although the body threw")
    }
}
