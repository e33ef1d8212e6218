import DequeModule

/// The streams open on one HTTP/2 connection, by stream id: what `StreamTable` keeps for each.
///
/// A client opens its streams on ascending ids of one parity (1, 3, 5, …: RFC 9113 §5.1.1), and they mostly
/// close in about the order they opened. So the values sit in a ring indexed by `(id − firstID) / 2`, with a
/// hole where a stream closed before older ones; the ring's front advances past holes. A lookup is an index,
/// not a hash. The ring spans from the oldest open stream to the newest, so it holds at most the streams
/// opened within a request's deadline of the oldest. Ids are computed as `Int`: the last id (2³¹ − 1) plus 2
/// does not trap.
struct OpenStreams<Value> {
    private var slots = Deque<Value?>()
    /// The stream id of `slots.first` (meaningless while `slots` is empty).
    private var firstID = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// `value` is open on `id`, which is above every id inserted so far and of their parity.
    mutating func insert(_ value: consuming Value, id: Int32) {
        let id = Int(id)
        if slots.isEmpty { firstID = id }
        let lastID = firstID + 2 * (slots.count - 1)
        precondition(slots.isEmpty || (id > lastID && (id - firstID) % 2 == 0), "stream ids must ascend by twos")
        let index = (id - firstID) / 2
        while slots.count < index { slots.append(nil) }
        slots.append(value)
        count += 1
    }

    /// The value open on `id`.
    subscript(id: Int32) -> Value? {
        guard let index = index(of: id) else { return nil }
        return slots[index]
    }

    /// Takes out the value open on `id`.
    mutating func remove(id: Int32) -> Value? {
        guard let index = index(of: id), let value = slots[index].take() else { return nil }
        count -= 1
        while let first = slots.first, first == nil {
            slots.removeFirst()
            firstID += 2
        }
        return value
    }

    /// Takes out every value, in ascending order of id.
    mutating func removeAll() -> [(id: Int32, value: Value)] {
        var all: [(id: Int32, value: Value)] = []
        all.reserveCapacity(count)
        forEach { all.append(($0, $1)) }
        slots.removeAll()
        count = 0
        return all
    }

    /// Calls `body` with each open stream, in ascending order of id.
    func forEach(_ body: (Int32, Value) -> Void) {
        var id = firstID
        for slot in slots {
            if let slot { body(Int32(id), slot) }
            id += 2
        }
    }

    private func index(of id: Int32) -> Int? {
        let id = Int(id)
        guard !slots.isEmpty, id >= firstID, (id - firstID) % 2 == 0 else { return nil }
        let index = (id - firstID) / 2
        return index < slots.count ? index : nil
    }
}
