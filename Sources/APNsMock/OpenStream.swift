import NIOCore
import NIOHPACK

/// A request whose last frame has not arrived yet: its headers and the body so far.
struct OpenStream {
    var headers: HPACKHeaders
    var body: ByteBuffer?
    /// DATA bytes received since the last stream WINDOW_UPDATE.
    var unreturnedWindow = 0

    mutating func append(_ buffer: inout ByteBuffer) {
        if body == nil {
            body = buffer
        } else {
            body!.writeBuffer(&buffer)
        }
    }
}
