import Testing
@testable import APNsClient

@Test func moduleBuilds() {}
