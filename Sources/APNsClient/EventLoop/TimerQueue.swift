import ServiceSupport

/// Deadlines of one event loop, earliest first (a binary heap): connections' request deadlines, PINGs,
/// connect timeouts, and the pools' timers. Timers due at the same instant fire in the order they were
/// added. Entries are never removed early: whoever a timer wakes checks whether it is still due (a
/// connection whose earliest deadline moved later just schedules again), which keeps this a plain heap.
struct TimerQueue<Payload> {
    private struct Entry {
        var deadline: MonotonicInstant
        var sequence: UInt64
        var payload: Payload

        func isBefore(_ other: Entry) -> Bool {
            deadline < other.deadline || (deadline == other.deadline && sequence < other.sequence)
        }
    }

    private var heap: [Entry] = []
    private var sequence: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    /// When the earliest timer is due.
    var earliest: MonotonicInstant? { heap.first?.deadline }

    mutating func schedule(at deadline: MonotonicInstant, _ payload: Payload) {
        sequence &+= 1
        heap.append(Entry(deadline: deadline, sequence: sequence, payload: payload))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].isBefore(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest timer if it is due at `now`.
    mutating func popDue(now: MonotonicInstant) -> Payload? {
        guard let first = heap.first, first.deadline <= now else { return nil }
        let last = heap.removeLast()
        guard !heap.isEmpty else { return first.payload }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].isBefore(heap[smallest]) { smallest = left }
            if right < heap.count && heap[right].isBefore(heap[smallest]) { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return first.payload
    }

    /// Removes every timer (the loop stops).
    mutating func removeAll() -> [Payload] {
        defer { heap.removeAll() }
        return heap.map(\.payload)
    }
}
