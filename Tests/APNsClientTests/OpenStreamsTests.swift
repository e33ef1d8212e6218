import Testing
@testable import APNsClient

/// The ring of open streams by id (`OpenStreams`), as nghttp2 numbers a client's streams: odd, ascending.
@Suite struct OpenStreamsTests {
    @Test func findsEachStreamByItsIDUntilItCloses() {
        var open = OpenStreams<String>()
        for (id, name) in [(1, "a"), (3, "b"), (5, "c"), (7, "d")] { open.insert(name, id: Int32(id)) }
        #expect(open.count == 4)
        #expect(open.remove(id: 3) == "b", "a stream closing before older ones leaves a hole")
        #expect(open[3] == nil)
        #expect(open.remove(id: 3) == nil, "a second close finds nothing")
        #expect([open[1], open[5], open[7]] == ["a", "c", "d"])
        #expect(open.remove(id: 1) == "a")
        #expect(open.count == 2)
        #expect([open[5], open[7]] == ["c", "d"], "the front moved past the hole; later ids still resolve")
        #expect(open[9] == nil && open[-1] == nil && open[6] == nil, "ids beyond, before, or of the other parity")
    }

    @Test func skippedIDsAreHolesAndAnEmptyRingStartsAtTheNextID() {
        var open = OpenStreams<Int>()
        open.insert(10, id: 1)
        open.insert(70, id: 7)  // ids 3 and 5 never opened (a submit that failed)
        #expect(open[3] == nil && open[5] == nil)
        #expect(open.remove(id: 1) == 10)
        #expect(open[7] == 70)
        #expect(open.remove(id: 7) == 70)
        #expect(open.isEmpty)
        open.insert(1001, id: 1001)
        #expect(open[1001] == 1001 && open[7] == nil)
        #expect(open.count == 1)
    }

    @Test func theLastStreamIDsOfAConnectionDoNotOverflow() {
        var open = OpenStreams<String>()
        open.insert("a", id: Int32.max - 2)
        open.insert("b", id: Int32.max)
        var seen: [Int32] = []
        open.forEach { id, _ in seen.append(id) }
        #expect(seen == [Int32.max - 2, Int32.max])
        #expect(open.remove(id: Int32.max - 2) == "a")
        #expect(open.remove(id: Int32.max) == "b")
        #expect(open.isEmpty)
    }

    @Test func removingAllListsTheStreamsInTheOrderTheyOpened() {
        var open = OpenStreams<String>()
        for (id, name) in [(5, "c"), (7, "d"), (9, "e"), (11, "f")] { open.insert(name, id: Int32(id)) }
        _ = open.remove(id: 9)
        var seen: [Int32] = []
        open.forEach { id, _ in seen.append(id) }
        #expect(seen == [5, 7, 11])
        let all = open.removeAll()
        #expect(all.map(\.id) == [5, 7, 11] && all.map(\.value) == ["c", "d", "f"])
        #expect(open.isEmpty && open[5] == nil)
    }
}
