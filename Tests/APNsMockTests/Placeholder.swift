import Testing
@testable import APNsMock

@Test func moduleBuilds() {}
