import Foundation
import Kafka
import Testing

/// `make test` runs the Kafka suites twice: with Debian's librdkafka and with a current one loaded through
/// `LD_LIBRARY_PATH`. This test makes the second pass fail, instead of quietly repeating the first, when the
/// library it asked for is not the one that loaded.
@Suite struct LibraryVersionTests {
    @Test func theLoadedLibrdkafkaIsTheOneThisRunAskedFor() throws {
        let loaded = KafkaLibrary.version
        #expect(loaded.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+"#, options: .regularExpression) != nil, "\(loaded)")
        if let expected = ProcessInfo.processInfo.environment["KAFKA_TESTS_LIBRDKAFKA_VERSION"] {
            #expect(loaded == expected, "asked for librdkafka \(expected) (LD_LIBRARY_PATH), loaded \(loaded)")
        }
    }
}
