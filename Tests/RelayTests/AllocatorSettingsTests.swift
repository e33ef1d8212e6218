#if canImport(Glibc)
import RelayApp
import Testing

/// `apns-relay run` fixes glibc's mmap threshold (see `AllocatorSettings`). What that does to the relay's
/// memory is measured by `make bench` (peak RSS, 1M events on 128 partitions), not here: whether one block
/// gets pages of its own depends on what the heap has free at that moment, which a shared test process
/// does not control.
struct AllocatorSettingsTests {
    @Test func glibcTakesTheThresholdWhenTheOperatorSetNone() {
        #expect(AllocatorSettings.apply(environment: ["PATH": "/usr/bin"]))
    }

    @Test func theOperatorsSettingWins() {
        #expect(!AllocatorSettings.apply(environment: ["MALLOC_MMAP_THRESHOLD_": "1048576"]))
    }
}
#endif
