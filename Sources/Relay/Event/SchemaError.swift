/// One problem the reference validator found.
public struct SchemaError: Hashable, Sendable, CustomStringConvertible {
    /// JSON pointer (RFC 6901) of the offending value; `""` is the whole document.
    public let pointer: String
    public let message: String

    public init(pointer: String, message: String) {
        self.pointer = pointer
        self.message = message
    }

    public var description: String { "\(pointer.isEmpty ? "/" : pointer): \(message)" }
}
