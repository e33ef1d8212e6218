import CRdKafka
import Dispatch
import Logging
import ServiceSupport
import Synchronization

/// Wakes librdkafka's fetcher for a topic whose records the application has drained.
///
/// librdkafka 2.0 stops fetching a partition whose queue holds `queued.min.messages` records or
/// `queued.max.messages.kbytes`, and decides again only when the leader's broker thread wakes: on a response,
/// an operation, or its one-second timer (2.2 added `fetch.queue.backoff.ms` for this). The consumer forwards
/// all of a topic's partitions to one queue, so they stop together, and an application that drains the queue
/// in less than a second then waits for that timer with nothing to read: at full speed the relay sat idle
/// 0.4 s of every second (Benchmarks/README, session 29). Any request to a broker wakes its thread, which then
/// decides again, and fetches unless a fetch is already out to that broker (one that waits on partitions with
/// nothing new, up to `fetch.wait.max.ms`: the relay keeps that short). The request sent here changes no
/// consumer state: the latest offsets of the topic's assigned partitions (`rd_kafka_offsets_for_times`, one
/// ListOffsets request per leader; an error answer makes librdkafka refresh its metadata). A partition
/// fetched from a follower (`client.rack`) is not woken: the request goes to its leader.
///
/// When is the poll thread's call (`FetchQueueWatch`); the request blocks for a round trip, so it runs on a
/// thread of its own, one at a time.
final class FetchNudger: Sendable {
    private let logger: Logger
    /// Topics to nudge, in the order asked; each at most once while it waits.
    private let pending = Mutex<[String]>([])
    private let wake = DispatchSemaphore(value: 0)
    /// Signalled by the thread as it ends (`stop`, after `start` started it).
    private let ended = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    /// Requests sent (answered or not).
    let sent = Atomic<Int>(0)

    init(logger: Logger) {
        self.logger = logger
    }

    /// Asks for a nudge of `topic`'s leaders (on the nudger's thread, soon).
    func request(_ topic: String) {
        let added = pending.withLock { pending in
            guard !pending.contains(topic) else { return false }
            pending.append(topic)
            return true
        }
        if added { wake.signal() }
    }

    /// Starts the nudger's thread: it sends what is asked until `isClosing()` (then `stop()` wakes it).
    /// `partitions(topic)` lists the topic's assigned partitions.
    func start(client: KafkaClient, isClosing: @escaping @Sendable () -> Bool, partitions: @escaping @Sendable (String) -> [Int32]) {
        started.store(true, ordering: .releasing)
        do {
            try DedicatedThread.start(name: "kafka-nudge") { [self] in
                run(client: client, isClosing: isClosing, partitions: partitions)
                ended.signal()
            }
        } catch {
            started.store(false, ordering: .releasing)
            logger.warning("\(error): a drained topic waits up to a second for librdkafka to fetch again")
        }
    }

    /// Wakes the thread so that it sees `isClosing()` (set it first) and waits until it has ended: at most a
    /// request's timeout, when one is out.
    func stop() {
        guard started.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        ended.wait()
    }

    private func run(client: KafkaClient, isClosing: () -> Bool, partitions: (String) -> [Int32]) {
        while !isClosing() {
            wake.wait()
            while let topic = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }), !isClosing() {
                let assigned = partitions(topic)
                guard !assigned.isEmpty else { continue }
                nudge(topic, assigned, client: client)
            }
        }
    }

    private func nudge(_ topic: String, _ partitions: [Int32], client: KafkaClient) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(partitions.count)) else { return }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for partition in partitions {
            // The "offset" of a times query is the timestamp; -1 asks for the latest offset.
            rd_kafka_topic_partition_list_add(list, topic, partition).pointee.offset = -1
        }
        let error = client.withHandle { rd_kafka_offsets_for_times($0, list, Self.timeoutMilliseconds) }
        sent.add(1, ordering: .relaxed)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            // Harmless: the fetcher then looks again at its own timer, as without the nudge.
            logger.debug("fetch nudge failed", metadata: ["topic": "\(topic)", "error": "\(String(cString: rd_kafka_err2str(error)))"])
        }
    }

    /// How long a nudge waits for its answers (the fetcher's own timer is a second).
    static let timeoutMilliseconds: Int32 = 1000
}

/// The poll thread's view of one topic queue: whether librdkafka may have stopped fetching into it, and
/// whether the application has drained it far enough that it should fetch again.
///
/// Armed when the queue held at least half of what librdkafka lets it hold before a take (the smaller of
/// `queued.min.messages` and `queued.max.messages.kbytes` over the records' mean value size, which is what
/// librdkafka counts; an estimate, hence half), then due once drained to a quarter (possibly by that same
/// take): one nudge per fill. A queue that never gets half full (the application keeps up, or the topic is
/// idle) is never nudged; one that a single fetch fills half-way may be, once per fetch, harmlessly.
struct FetchQueueWatch {
    /// `queued.min.messages` and `queued.max.messages.kbytes` in bytes.
    let maxRecords: Int
    let maxBytes: Int
    private var armed = false
    /// Recent records and their values' bytes, each decayed by a tenth per take: their ratio is the mean.
    private var recentRecords = 0.0
    private var recentBytes = 0.0

    init(maxRecords: Int, maxBytes: Int) {
        self.maxRecords = max(1, maxRecords)
        self.maxBytes = max(1, maxBytes)
    }

    /// What librdkafka lets the queue hold, in records, by the records seen so far.
    var capacity: Int {
        guard recentRecords > 0, recentBytes > 0 else { return maxRecords }
        return max(1, min(maxRecords, Int(Double(maxBytes) * recentRecords / recentBytes)))
    }

    /// The application took `taken` records whose values hold `bytes`, and `length` are left.
    /// - Returns: whether to nudge the topic's fetcher now.
    mutating func took(_ taken: Int, bytes: Int, leaving length: Int) -> Bool {
        if taken > 0 {
            recentRecords = recentRecords * 0.9 + Double(taken)
            recentBytes = recentBytes * 0.9 + Double(bytes)
        }
        let capacity = capacity
        // The queue before this take: a take may empty a full queue in one go.
        if (length + taken) * 2 >= capacity { armed = true }
        guard armed, length * 4 <= capacity else { return false }
        armed = false
        return true
    }
}

/// The poll thread's ``FetchQueueWatch`` of each topic queue, made on the queue's first take.
struct FetchQueueWatches {
    private let initial: FetchQueueWatch
    private var byQueue: [OpaquePointer: FetchQueueWatch] = [:]

    init(_ initial: FetchQueueWatch) { self.initial = initial }

    /// The poll thread took `taken` records, whose values hold `bytes`, from `topic`'s queue.
    /// - Returns: whether to nudge the topic's fetcher now.
    mutating func took(_ taken: Int, bytes: Int, from topic: RecordQueues.TopicQueue) -> Bool {
        byQueue[topic.queue, default: initial].took(taken, bytes: bytes, leaving: Int(rd_kafka_queue_length(topic.queue)))
    }
}
