/// A test's own failure: something that should have happened did not (a deadline passed, a process failed).
package struct TestFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
