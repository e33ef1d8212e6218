import APNsCore
import DequeModule

/// Requests waiting for a connection with a free stream (or for the adaptive limit), in the order they are
/// served:
/// - by class `rank`, lower first: every urgent rank before every bulk rank, and within a lane apns-priority
///   10 before 5 before 1 (see `WaitClass`);
/// - within a lane, after `Self.priorityStreak` requests in a row served ahead of waiting lower ranks of
///   that lane, the next lower rank with waiters gets one: a sustained priority-10 backlog slows priority
///   5 and 1 down to a ninth of the service, never to nothing (a request starved to its deadline would end
///   unsent and wait again, holding its partition's offsets). The streak never crosses lanes: a bulk waiter
///   never passes a waiting urgent one. Bulk gets its service from its own share of the pool
///   (`APNsClientConfiguration.Pool.urgentShare` reserves only part of it for urgent) and, between urgent
///   bursts, from everything; an urgent backlog that never ends is the relay's to throttle, not a reason
///   to push a campaign ahead of a login code;
/// - within a rank the apps (`WaitClass.flow`, the APNs topic) take turns, one request each (deficit
///   round-robin with a quantum of one request: requests are near enough in cost), so one bundle id's
///   backlog never starves another's;
/// - one app's requests in one rank stay first in, first out.
///
/// Taking the next waiter is O(1) under the pool's lock. Removal by id (cancellation) and by deadline is rare
/// and linear.
struct WaitQueue<Element> {
    private struct Rank {
        /// Each app's waiting requests, oldest first, at the app's index. An app without any keeps its (empty)
        /// queue, so that a request that waits costs no allocation, unless more than `keptIdleFlows` apps are
        /// known. Queues sit in an array, not in a dictionary by app: a dictionary's getter copies the queue
        /// it reads (a retain and a release), and its key is hashed again at every access.
        var flows: [Deque<Element>] = []
        /// Each app's index in `flows` (hashed once per request, when it waits).
        var indices: [String: Int] = [:]
        /// The app at each index of `flows` (`nil`: a free slot, listed in `freeSlots`).
        var names: [String?] = []
        var freeSlots: [Int] = []
        /// The indices of the apps with requests, in the order they are served next.
        var turns = Deque<Int>()
        var count = 0

        /// The index of `flow`'s queue, made if the app has none.
        mutating func index(of flow: String) -> Int {
            if let index = indices[flow] { return index }
            let index: Int
            if let free = freeSlots.popLast() {
                index = free
                names[index] = flow
            } else {
                index = flows.count
                flows.append(Deque())
                names.append(flow)
            }
            indices[flow] = index
            return index
        }

        /// Lets an app whose queue is empty go when more than `keptIdleFlows` are known; `turns` must
        /// not hold it.
        mutating func release(_ index: Int, keeping kept: Int) {
            guard flows[index].isEmpty, indices.count > kept, let name = names[index] else { return }
            indices[name] = nil
            names[index] = nil
            flows[index] = Deque()
            freeSlots.append(index)
        }
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

    mutating func append(_ element: consuming Element, in waitClass: WaitClass = .default) {
        let rank = waitClass.rank
        while ranks.count <= rank { ranks.append(Rank()) }
        let flow = ranks[rank].index(of: waitClass.flow)
        if ranks[rank].flows[flow].isEmpty { ranks[rank].turns.append(flow) }
        ranks[rank].flows[flow].append(consume element)
        ranks[rank].count += 1
        count += 1
    }

    /// The next waiter to serve: the first rank with any, the app whose turn it is there.
    ///
    /// With `skippingRanksFrom`, only ranks below it are considered (the pool passes
    /// `WaitClass.firstBulkRank` when bulk is at its cap: urgent waiters behind bulk ones still go).
    mutating func popFirst(skippingRanksFrom end: Int = .max) -> Element? {
        let end = min(end, ranks.count)
        guard count > 0, let first = ranks[..<end].firstIndex(where: { $0.count > 0 }) else { return nil }
        var rank = first
        // The streak passes to a lower rank of the same lane only (see the type's comment).
        let laneEnd = min(end, WaitClass.endOfLane(ofRank: first))
        if let lower = ranks[(first + 1)..<laneEnd].firstIndex(where: { $0.count > 0 }) {
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
        let element = ranks[rank].flows[flow].removeFirst()
        if ranks[rank].flows[flow].isEmpty {
            ranks[rank].release(flow, keeping: Self.keptIdleFlows)
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
                guard let index = ranks[rank].flows[flow].firstIndex(where: predicate) else { continue }
                let element = ranks[rank].flows[flow].remove(at: index)
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
                removed += ranks[rank].flows[flow].filter(predicate)
                let gone = removed.count - before
                guard gone > 0 else { continue }
                ranks[rank].flows[flow].removeAll(where: predicate)
                ranks[rank].count -= gone
                count -= gone
            }
            for flow in ranks[rank].turns where ranks[rank].flows[flow].isEmpty {
                forget(flow, inRank: rank)
            }
        }
        return removed
    }

    /// Requests waiting in `lane` (O(ranks): for the gauges and the decision to open a connection).
    func count(in lane: DeliveryLane) -> Int {
        let lanes = WaitClass.ranks(of: lane)
        var waiting = 0
        for rank in lanes.clamped(to: ranks.indices) { waiting += ranks[rank].count }
        return waiting
    }

    /// The smallest `key` of the elements (a linear scan), `nil` when empty.
    func minimum<Key: Comparable>(of key: (Element) -> Key) -> Key? {
        var smallest: Key?
        for rank in ranks {
            for flow in rank.flows {
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
        return ranks.flatMap { rank in rank.turns.flatMap { rank.flows[$0] } }
    }

    /// Takes an app that has no more waiting requests out of the turns.
    private mutating func forget(_ flow: Int, inRank rank: Int) {
        guard ranks[rank].flows[flow].isEmpty else { return }
        if let turn = ranks[rank].turns.firstIndex(of: flow) { ranks[rank].turns.remove(at: turn) }
        ranks[rank].release(flow, keeping: Self.keptIdleFlows)
    }
}

/// How a waiting request is ordered against the others (`WaitQueue`).
///
/// The rank is the lane first, then apns-priority: urgent ranks 0–2 (priority 10, 5, 1), then bulk ranks
/// 3–5. A lane is a block of `ranksPerLane` ranks, so the queue compares ranks alone and the lane is the
/// rank's block.
struct WaitClass: Hashable, Sendable {
    /// Lower is served first; at most `maxRank`.
    var rank: Int
    /// Whose request it is (the APNs topic): requests of one rank are served one app at a time, in turn.
    var flow: String

    /// Priorities within a lane (apns-priority 10, 5, 1).
    static let ranksPerLane = 3
    /// Every rank from here on is bulk.
    static let firstBulkRank = ranksPerLane
    static let maxRank = 2 * ranksPerLane - 1

    init(rank: Int, flow: String) {
        self.rank = min(max(0, rank), Self.maxRank)
        self.flow = flow
    }

    /// `priorityRank` within `lane`: 0 for apns-priority 10, 1 for 5, 2 for 1.
    init(lane: DeliveryLane, priorityRank: Int, flow: String) {
        let base = lane == .urgent ? 0 : Self.firstBulkRank
        self.init(rank: base + min(max(0, priorityRank), Self.ranksPerLane - 1), flow: flow)
    }

    var lane: DeliveryLane { rank < Self.firstBulkRank ? .urgent : .bulk }

    /// The ranks of `lane`.
    static func ranks(of lane: DeliveryLane) -> Range<Int> {
        lane == .urgent ? 0..<firstBulkRank : firstBulkRank..<(maxRank + 1)
    }

    /// The first rank after `rank`'s lane.
    static func endOfLane(ofRank rank: Int) -> Int {
        rank < firstBulkRank ? firstBulkRank : maxRank + 1
    }

    /// A request without a class of its own (channel management): with priority-10 bulk pushes, as one app
    /// (where it was before lanes; like any request a plain client sends, it is bulk).
    static let `default` = WaitClass(lane: .bulk, priorityRank: 0, flow: "")

    /// The class of a notification: its lane (`notification.lane`), then its apns-priority (10, APNs'
    /// default when none is given, before 5 before 1), one flow per APNs topic.
    init(_ notification: APNsNotification) {
        let priorityRank = switch notification.priority ?? .immediate {
        case .immediate: 0
        case .powerConsiderate: 1
        case .low: 2
        }
        self.init(lane: notification.lane, priorityRank: priorityRank, flow: notification.topic)
    }
}
