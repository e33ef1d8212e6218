import APNsCore
import DequeModule

/// Requests waiting for a connection with a free stream (or for the adaptive limit), in the order they are
/// served:
/// - by class `rank`, lower first (apns-priority 10 before 5 before 1; see `WaitClass`), except that after
///   `Self.priorityStreak` requests in a row served ahead of waiting lower ranks, the next lower rank with
///   waiters gets one: a sustained priority-10 backlog slows priority 5 and 1 down to a ninth of the
///   service, never to nothing (a request starved to its deadline would end unsent and wait again, holding
///   its partition's offsets);
/// - within a rank the apps (`WaitClass.flow`, the APNs topic) take turns, one request each (deficit
///   round-robin with a quantum of one request: requests are near enough in cost), so one bundle id's
///   backlog never starves another's;
/// - one app's requests in one rank stay first in, first out.
///
/// Taking the next waiter is O(1) under the pool's lock. Removal by id (cancellation) and by deadline is rare
/// and linear.
struct WaitQueue<Element> {
    private struct Rank {
        /// Each app's waiting requests, oldest first. An app without any keeps its (empty) queue, so that
        /// a request that waits costs no allocation, unless more than `keptIdleFlows` apps are known.
        var flows: [String: Deque<Element>] = [:]
        /// The apps with requests, in the order they are served next.
        var turns = Deque<String>()
        var count = 0
    }

    /// Indexed by rank; ranks are few and small.
    private var ranks: [Rank] = []
    private(set) var count = 0
    /// Requests served in a row from a rank while a lower one had waiters.
    private var streak = 0
    static var priorityStreak: Int { 8 }
    /// Apps whose empty queues are kept per rank (beyond, an app's queue goes when it empties).
    static var keptIdleFlows: Int { 64 }

    var isEmpty: Bool { count == 0 }

    mutating func append(_ element: Element, in waitClass: WaitClass = .default) {
        let rank = waitClass.rank
        while ranks.count <= rank { ranks.append(Rank()) }
        let waiting = ranks[rank].flows[waitClass.flow]?.count
        if waiting == nil { ranks[rank].flows[waitClass.flow] = Deque() }
        ranks[rank].flows[waitClass.flow]!.append(element)
        if (waiting ?? 0) == 0 { ranks[rank].turns.append(waitClass.flow) }
        ranks[rank].count += 1
        count += 1
    }

    /// The next waiter to serve: the first rank with any, the app whose turn it is there.
    mutating func popFirst() -> Element? {
        guard count > 0, let first = ranks.firstIndex(where: { $0.count > 0 }) else { return nil }
        var rank = first
        if let lower = ranks[(first + 1)...].firstIndex(where: { $0.count > 0 }) {
            if streak >= Self.priorityStreak {
                rank = lower
                streak = 0
            } else {
                streak += 1
            }
        } else {
            streak = 0
        }
        let flow = ranks[rank].turns.removeFirst()
        let element = ranks[rank].flows[flow]!.removeFirst()
        if ranks[rank].flows[flow]!.isEmpty {
            if ranks[rank].flows.count > Self.keptIdleFlows { ranks[rank].flows[flow] = nil }
        } else {
            ranks[rank].turns.append(flow)
        }
        ranks[rank].count -= 1
        count -= 1
        return element
    }

    /// Removes the first element matching `predicate` (in no particular order of apps).
    mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        for rank in ranks.indices where ranks[rank].count > 0 {
            for flow in ranks[rank].turns {
                guard let index = ranks[rank].flows[flow]!.firstIndex(where: predicate) else { continue }
                let element = ranks[rank].flows[flow]!.remove(at: index)
                forget(flow, inRank: rank)
                ranks[rank].count -= 1
                count -= 1
                return element
            }
        }
        return nil
    }

    /// Removes and returns every element matching `predicate`, keeping the order of the rest.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        for rank in ranks.indices where ranks[rank].count > 0 {
            for flow in ranks[rank].turns {
                let before = removed.count
                removed += ranks[rank].flows[flow]!.filter(predicate)
                let gone = removed.count - before
                guard gone > 0 else { continue }
                ranks[rank].flows[flow]!.removeAll(where: predicate)
                ranks[rank].count -= gone
                count -= gone
            }
            for flow in ranks[rank].turns where ranks[rank].flows[flow]!.isEmpty {
                forget(flow, inRank: rank)
            }
        }
        return removed
    }

    /// The smallest `key` of the elements (a linear scan), `nil` when empty.
    func minimum<Key: Comparable>(of key: (Element) -> Key) -> Key? {
        var smallest: Key?
        for rank in ranks {
            for flow in rank.flows.values {
                for element in flow {
                    let value = key(element)
                    if smallest.map({ value < $0 }) ?? true { smallest = value }
                }
            }
        }
        return smallest
    }

    /// Removes every element, in the order they would have been served within each app.
    mutating func removeAll() -> [Element] {
        defer {
            ranks.removeAll()
            count = 0
            streak = 0
        }
        return ranks.flatMap { rank in rank.turns.flatMap { rank.flows[$0]! } }
    }

    /// Takes an app that has no more waiting requests out of the turns.
    private mutating func forget(_ flow: String, inRank rank: Int) {
        guard ranks[rank].flows[flow]?.isEmpty == true else { return }
        if ranks[rank].flows.count > Self.keptIdleFlows { ranks[rank].flows[flow] = nil }
        if let turn = ranks[rank].turns.firstIndex(of: flow) { ranks[rank].turns.remove(at: turn) }
    }
}

/// How a waiting request is ordered against the others (`WaitQueue`).
struct WaitClass: Hashable, Sendable {
    /// Lower is served first; at most `maxRank`.
    var rank: Int
    /// Whose request it is (the APNs topic): requests of one rank are served one app at a time, in turn.
    var flow: String

    static let maxRank = 7

    init(rank: Int, flow: String) {
        self.rank = min(max(0, rank), Self.maxRank)
        self.flow = flow
    }

    /// A request without a class of its own: served with the most urgent, as one app.
    static let `default` = WaitClass(rank: 0, flow: "")

    /// The class of a notification: ranked by its apns-priority (10, APNs' default when none is given,
    /// before 5 before 1), one flow per APNs topic.
    init(_ notification: APNsNotification) {
        let rank = switch notification.priority ?? .immediate {
        case .immediate: 0
        case .powerConsiderate: 1
        case .low: 2
        }
        self.init(rank: rank, flow: notification.topic)
    }
}
