import Synchronization

/// A one-way switch read on hot paths without a lock: off until `set()`, then on for good
/// (e.g. "the relay abandoned its in-flight work", "the caller cancelled").
package final class Flag: Sendable {
    private let on = Atomic<Bool>(false)

    package init() {}

    package var isSet: Bool { on.load(ordering: .acquiring) }

    package func set() { on.store(true, ordering: .releasing) }

    /// Sets the flag. - Returns: whether this call set it (`false`: it was already set).
    package func setOnce() -> Bool { !on.exchange(true, ordering: .acquiringAndReleasing) }
}
