import Kafka
import KafkaMock
import TestSupport
import Testing

@Suite("Mock brokers going down while processes start")
struct BrokerDownWhileSpawningTests {
    /// A mock broker going down re-binds its port at once; a child process between its fork and the end of
    /// its exec still holds the old listener, and librdkafka's mock then aborted the whole test process
    /// ("Failed to bind mock broker socket … Address already in use"). Without `ForkGuard` this test aborts
    /// within its first rounds; holding the guard only until `posix_spawn` returned still aborted once in a
    /// full run (the parent wakes before the child closes its close-on-exec descriptors), hence
    /// `ForkGuard.starting`, which waits for that.
    ///
    /// The verdict is that the process lives; how long the rounds take is not part of it. A round takes up to
    /// two seconds on a quiet machine (librdkafka's mock sometimes serves a command only at its next 1 s
    /// poll, and a round sends two), and a loaded one adds its slow process starts: 25 rounds went past a
    /// minute. Each start has its own deadline (`runProcess`); the time limit only guards against a hang.
    @Test(.timeLimit(.minutes(5)))
    func brokersGoingDownWhileProcessesStartDoNotAbortTheProcess() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        for _ in 0..<25 {
            // The broker goes down (and up) while a process starts.
            async let process = runProcess("/bin/true", [], timeout: .seconds(10))
            try cluster.setBrokerDown(1)
            try cluster.setBrokerUp(1)
            #expect(try await process.status == 0)
        }
    }
}
