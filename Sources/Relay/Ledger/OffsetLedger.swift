import DequeModule

/// Decides which Kafka offsets may be stored, so that a commit never passes an event without a result.
///
/// Events of one partition start in offset order but finish in any order (APNs answers out of order,
/// retries take longer). The ledger keeps, per partition, the offsets that have started and whether each
/// has finished (its result acknowledged by Kafka). The *frontier* is the offset just above the longest
/// finished prefix: the next offset a restarted consumer must read. Only the frontier is ever stored —
/// that is the whole at-least-once argument.
///
/// Offsets need not be contiguous (compaction and transaction markers leave gaps); only their order
/// matters. Not thread-safe: the relay keeps it behind its own lock.
package struct OffsetLedger<Partition: Hashable & Sendable>: Sendable {
    private var partitions: [Partition: PartitionLedger] = [:]

    package init() {}

    package typealias Begin = OffsetBegin

    /// Records that the event at `offset` has started, unless it already has (`.seen`).
    @discardableResult
    package mutating func begin(_ partition: Partition, offset: Int64) -> Begin {
        // Through an index, not `partitions[partition, default:]`: the dictionary's modify accessor is a
        // coroutine whose frame was allocated on every call (measured: ~4 allocations per event in here).
        if partitions.index(forKey: partition) == nil { partitions[partition] = PartitionLedger() }
        let index = partitions.index(forKey: partition)!
        // Through the mutating accessor only: reading a field by `values[index]` copies the partition's
        // ledger (a retain and a release of each of its deques).
        let (begin, belowFrontier) = partitions.values[index].begin(offset)
        if belowFrontier { seenBelowFrontier += 1 }
        return begin
    }

    /// Offsets delivered again after the frontier had passed them (skipped as done; a diagnostic: with
    /// `gapsSteppedOver`, it tells an offset that came late from one that never came).
    package private(set) var seenBelowFrontier = 0

    /// Records that the event at `offset` has finished for good (its result is durable in Kafka).
    ///
    /// - Returns: the new frontier (the offset to store: one past the last finished prefix) when it
    ///   advanced, else `nil`.
    package mutating func finish(_ partition: Partition, offset: Int64) -> Int64? {
        // In place: a copy of the partition's ledger would copy its deques on every finish.
        guard let index = partitions.index(forKey: partition) else { return nil }
        let (frontier, gaps) = partitions.values[index].finish(offset)
        gapsSteppedOver += gaps
        return frontier
    }

    /// How often a frontier stepped over offsets no event was begun for. Compaction and transaction markers
    /// leave such gaps; on other topics one means an offset was delivered late or never (a diagnostic).
    package private(set) var gapsSteppedOver = 0

    /// Events begun but not finished on `partition`.
    package func inFlight(_ partition: Partition) -> Int {
        partitions[partition]?.inFlight ?? 0
    }

    /// Events begun but not finished on all partitions.
    package var totalInFlight: Int {
        partitions.values.reduce(0) { $0 + $1.inFlight }
    }

    /// The offset to store for `partition` now, if any event there has finished.
    package func frontier(_ partition: Partition) -> Int64? {
        partitions[partition]?.frontier
    }

    /// Forgets `partition` (after a revoke): unfinished events are abandoned, never stored; the next owner
    /// of the partition reads them again.
    ///
    /// - Returns: the number of events abandoned.
    @discardableResult
    package mutating func release(_ partition: Partition) -> Int {
        partitions.removeValue(forKey: partition)?.inFlight ?? 0
    }
}

/// One partition's started offsets, in order, with a finished flag each.
///
/// Two `Deque`s, so `begin` and advancing the frontier are O(1) and `finish` is a binary search.
struct PartitionLedger: Sendable {
    private var offsets = Deque<Int64>()
    private var finished = Deque<Bool>()
    private(set) var frontier: Int64?
    private(set) var inFlight = 0
    /// Times the frontier stepped over offsets never begun.
    private(set) var gaps = 0

    /// - Returns: how the offset begins, and whether it was below the frontier (seen and finished long ago).
    mutating func begin(_ offset: Int64) -> (OffsetBegin, belowFrontier: Bool) {
        if let frontier, offset < frontier { return (.seen, true) }
        guard let last = offsets.last, offset <= last else {
            offsets.append(offset)
            finished.append(false)
            inFlight += 1
            return (.begun, false)
        }
        let index = firstIndex(notBelow: offset)
        if offsets[index] == offset { return (.seen, false) }
        offsets.insert(offset, at: index)
        finished.insert(false, at: index)
        inFlight += 1
        return (.late, false)
    }

    /// - Returns: the new frontier when it moved, and the gaps it stepped over doing so.
    mutating func finish(_ offset: Int64) -> (frontier: Int64?, gapsSteppedOver: Int) {
        guard let index = indexOf(offset), !finished[index] else { return (nil, 0) }
        finished[index] = true
        inFlight -= 1
        guard index == 0 else { return (nil, 0) }
        let gapsBefore = gaps
        while finished.first == true {
            finished.removeFirst()
            let next = offsets.removeFirst()
            if let frontier, next > frontier { gaps += 1 }
            frontier = next + 1
        }
        return (frontier, gaps - gapsBefore)
    }

    private func indexOf(_ offset: Int64) -> Int? {
        let low = firstIndex(notBelow: offset)
        return low < offsets.count && offsets[low] == offset ? low : nil
    }

    /// The first index whose offset is `offset` or above (binary search).
    private func firstIndex(notBelow offset: Int64) -> Int {
        var low = 0
        var high = offsets.count
        while low < high {
            let mid = (low + high) / 2
            if offsets[mid] < offset { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

/// What `begin` made of an offset.
package enum OffsetBegin: Sendable, Hashable {
    /// Above every offset begun so far: the usual case.
    case begun
    /// Begun before, or below the frontier (done): a redelivery; the caller skips the event.
    case seen
    /// Never begun, but below offsets that were: delivered out of order. It is begun now (and holds the
    /// frontier until it finishes) — skipping it would lose it, since the frontier would pass it.
    case late
}
