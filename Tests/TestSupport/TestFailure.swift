/// A test's own failure: something that should have happened did not (a deadline passed, a process failed).
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
