/// Callers waiting for a free stream, first in first out.
///
/// A ring of slots with a head index so taking the first waiter is O(1) under the pool's lock (with a
/// thousand waiters, `Array.removeFirst` dominated the client's CPU). Removal by id (cancellation) is rare
/// and linear.
struct WaitQueue<Element> {
    private var items: [Element?] = []
    private var head = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ element: Element) {
        items.append(element)
        count += 1
    }

    mutating func popFirst() -> Element? {
        while head < items.count {
            let item = items[head]
            items[head] = nil
            head += 1
            if let item {
                count -= 1
                compact()
                return item
            }
        }
        return nil
    }

    /// Removes the first element matching `predicate`.
    mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        for i in head..<items.count {
            if let item = items[i], predicate(item) {
                items[i] = nil
                count -= 1
                compact()
                return item
            }
        }
        return nil
    }

    /// Removes and returns every element matching `predicate`, keeping order of the rest.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        for i in head..<items.count {
            if let item = items[i], predicate(item) {
                items[i] = nil
                count -= 1
                removed.append(item)
            }
        }
        compact()
        return removed
    }

    mutating func removeAll() -> [Element] { removeAll { _ in true } }

    private mutating func compact() {
        if count == 0 {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
