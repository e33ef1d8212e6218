import APNsCore
import Logging
import NIOCore
import ServiceSupport
import Synchronization

/// State shared by all connections of one mock server, on the push and the channel-management listener.
final class MockServerContext: Sendable {
    let environment: APNsEnvironment
    /// `APNsMockConfiguration.coalescesWrites`.
    let coalescesWrites: Bool
    let clock: WallClock
    let registry: DeviceRegistry
    let channels: ChannelRegistry
    let broadcastDisabledBundles: Set<String>
    let faults: FaultInjector
    let observations: ObservationStore
    let authority: ProviderTokenAuthority
    let tokenLifetimeSeconds: Int64
    let tokenUpdateIntervalMilliseconds: Int64
    let logger: Logger
    private let maxStreams: Atomic<Int>
    private let connections = Mutex<[Int: ConnectionHandle]>([:])
    private let nextConnectionID = Atomic<Int>(0)
    /// When the emulated server's answer queue is next free (`FaultInjector.Latency.answersPerSecond`).
    private let answerQueueFree = Mutex(NIODeadline.uptimeNanoseconds(0))

    struct ConnectionHandle: Sendable {
        var channel: any Channel
        var handler: NIOLoopBound<APNsConnectionHandler>
    }

    /// When `answers` more answers are done by a server answering `rate` per second, first come first
    /// served over all connections.
    func answerQueueDeadline(answers: Int, rate: Int) -> NIODeadline {
        answerQueueFree.withLock { free in
            free = max(free, .now()) + .nanoseconds(Int64(answers) * 1_000_000_000 / Int64(max(1, rate)))
            return free
        }
    }

    init(configuration: APNsMockConfiguration, logger: Logger) {
        environment = configuration.environment
        coalescesWrites = configuration.coalescesWrites
        clock = configuration.clock
        registry = DeviceRegistry()
        channels = ChannelRegistry(environment: configuration.environment, maxChannelsPerApp: configuration.maxChannelsPerApp)
        broadcastDisabledBundles = configuration.broadcastDisabledBundles
        faults = FaultInjector()
        observations = ObservationStore(historyLimit: configuration.acceptedHistoryLimit)
        authority = ProviderTokenAuthority(
            keys: configuration.providerKeys,
            strictFleet: configuration.strictFleet,
            updateIntervalSeconds: configuration.tokenUpdateInterval.components.seconds
        )
        tokenLifetimeSeconds = configuration.tokenLifetime.components.seconds
        tokenUpdateIntervalMilliseconds = configuration.tokenUpdateInterval.components.seconds * 1000
        maxStreams = Atomic(configuration.maxConcurrentStreams)
        self.logger = logger
    }

    /// MAX_CONCURRENT_STREAMS after a valid credential.
    var maxConcurrentStreams: Int {
        get { maxStreams.load(ordering: .relaxed) }
        set { maxStreams.store(newValue, ordering: .relaxed) }
    }

    func makeConnectionID() -> Int { nextConnectionID.add(1, ordering: .relaxed).newValue }

    func connectionOpened(_ id: Int, channel: any Channel, handler: APNsConnectionHandler) {
        let handle = ConnectionHandle(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
        connections.withLock { $0[id] = handle }
        observations.update { $0.connectionsOpened += 1 }
    }

    func connectionClosed(_ id: Int) {
        _ = connections.withLock { $0.removeValue(forKey: id) }
    }

    var openConnectionCount: Int { connections.withLock { $0.count } }

    /// Runs `body` on every open connection's event loop and waits for all of them.
    func forEachConnection(_ body: @escaping @Sendable (APNsConnectionHandler) -> Void) async {
        for handle in connections.withLock({ Array($0.values) }) {
            try? await handle.channel.eventLoop.submit { Self.run(body, on: handle) }.get()
        }
    }

    /// Runs `body` on every open connection's event loop without waiting: for callers that are not async
    /// (a fault's setter), which must not depend on Swift's cooperative pool being free to run a task.
    func onEachConnection(_ body: @escaping @Sendable (APNsConnectionHandler) -> Void) {
        for handle in connections.withLock({ Array($0.values) }) {
            handle.channel.eventLoop.execute { Self.run(body, on: handle) }
        }
    }

    /// A command on one connection, on its event loop: `body`, then what it changed goes out.
    private static func run(_ body: (APNsConnectionHandler) -> Void, on handle: ConnectionHandle) {
        let handler = handle.handler.value
        body(handler)
        handler.flushFromCommand()
    }
}
