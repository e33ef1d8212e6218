import Testing
@testable import Relay

@Test func moduleBuilds() {}
