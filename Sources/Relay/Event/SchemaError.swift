/// One problem the reference validator found.
package struct SchemaError: Hashable, Sendable, CustomStringConvertible {
    /// JSON pointer (RFC 6901) of the offending value; `""` is the whole document.
    package let pointer: String
    package let message: String

    package init(pointer: String, message: String) {
        self.pointer = pointer
        self.message = message
    }

    package var description: String { "\(pointer.isEmpty ? "/" : pointer): \(message)" }
}
