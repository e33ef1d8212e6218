import DequeModule

/// Callers waiting for a free stream, first in first out (a `Deque`: taking the first waiter is O(1) under
/// the pool's lock). Removal by id (cancellation) and by deadline is rare and linear.
struct WaitQueue<Element> {
    private var items = Deque<Element>()

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func popFirst() -> Element? { items.popFirst() }

    /// Removes the first element matching `predicate`.
    mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        guard let index = items.firstIndex(where: predicate) else { return nil }
        return items.remove(at: index)
    }

    /// Removes and returns every element matching `predicate`, keeping the order of the rest.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        let removed: [Element] = items.filter(predicate)
        if !removed.isEmpty { items.removeAll(where: predicate) }
        return removed
    }

    /// The smallest `key` of the elements (a linear scan), `nil` when empty.
    func minimum<Key: Comparable>(of key: (Element) -> Key) -> Key? {
        items.lazy.map(key).min()
    }

    mutating func removeAll() -> [Element] {
        defer { items.removeAll() }
        return Array(items)
    }
}
