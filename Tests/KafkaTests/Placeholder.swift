import Testing
@testable import Kafka

@Test func moduleBuilds() {}
