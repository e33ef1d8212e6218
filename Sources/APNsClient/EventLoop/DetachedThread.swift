import CNGHTTP2
import Glibc
import Synchronization

/// How many of something are alive (an `Atomic` that closures can share).
final class LiveCount: Sendable {
    let value = Atomic<Int>(0)
    var current: Int { value.load(ordering: .acquiring) }
    func increment() { value.add(1, ordering: .relaxed) }
    func decrement() { value.subtract(1, ordering: .releasing) }
}
