import Kafka
import ServiceSupport

extension RelayService {
    /// Returns when the relay must stop (`failure` is set): a fatal producer or consumer error, a refusal of
    /// credentials that never worked, or a failure the pipeline reported.
    func watchForFailure(_ failure: Latch<String>) async {
        await withTaskGroup(of: Void.self) { watch in
            watch.addTask { [producer, failure] in
                if let error = await producer.fatalError.wait() {
                    failure.set("Kafka producer fatal error, results can no longer be published (if it says fenced: another relay with the same kafka.transactionalId took this one's place; each replica needs its own): \(error)")
                }
            }
            watch.addTask { [consumer, failure] in
                if let error = await consumer.fatalError.wait() {
                    failure.set("Kafka consumer fatal error, no more events can be consumed (if it says fenced: another relay with the same kafka.groupInstanceId took this one's place; each replica needs its own): \(error)")
                }
            }
            for refused in [producer.credentialsRefused, consumer.credentialsRefused] {
                watch.addTask { [failure] in await self.actOnRefusedCredentials(refused, failure: failure) }
            }
            watch.addTask { [failure] in _ = await failure.wait() }
            // A watcher can end without a failure (a refusal of credentials that had worked is only logged):
            // the relay stops only once one is set, or when the pipeline ends and cancels this.
            while await watch.next() != nil, failure.value == nil {}
            watch.cancelAll()
        }
    }
}
