import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A free TCP port on 127.0.0.1 (bound, read, closed), for servers that cannot bind port 0 themselves. Free
/// only at this moment: a test that needs a port where connections are refused holds a ``RefusingPort``.
package func freeLocalPort() throws -> Int {
    try RefusingPort().port
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (a server in another process says
/// nothing when it is ready), or throws at the deadline.
package func waitForListener(port: Int, within timeout: Duration = .seconds(30)) async throws {
    try await eventually("a listener on 127.0.0.1:\(port)", within: timeout, every: .milliseconds(20)) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// A TCP port on 127.0.0.1 where connections are refused, for as long as this object lives: its socket is
/// bound (so no other server can take the port) but never listens. A port from ``freeLocalPort()`` is free
/// only at that moment: a server started by a test running in parallel once took it, and a test expecting a
/// refused connection had it accepted and closed instead.
package final class RefusingPort: Sendable {
    package let port: Int
    private let descriptor: Int32

    package init() throws {
        (descriptor, port) = try bindLoopback(listening: false)
    }

    deinit { close(descriptor) }
}

/// A TCP socket listening on 127.0.0.1 that nobody serves unless the test does: the kernel completes
/// connections into its backlog, and ``acceptAndClose()`` closes each at once, unread.
package final class SilentListener: Sendable {
    package let port: Int
    private let descriptor: Int32
    /// Set once the accept loop runs: then it closes the descriptor when it ends, so the number cannot be
    /// reused under a pending accept.
    private let loopOwnsDescriptor = Atomic<Bool>(false)

    package init() throws {
        (descriptor, port) = try bindLoopback(listening: true)
    }

    /// Closes every connection as it arrives, on a dispatch thread, until this listener is gone.
    package func acceptAndClose() {
        guard !loopOwnsDescriptor.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let descriptor = self.descriptor
        DispatchQueue.global().async {
            while true {
                let connection = accept(descriptor, nil, nil)
                if connection < 0 { break }
                close(connection)
            }
            close(descriptor)
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))  // ends a pending accept
        if !loopOwnsDescriptor.load(ordering: .acquiring) { close(descriptor) }
    }
}

private func bindLoopback(listening: Bool) throws -> (descriptor: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && (!listening || listen(fd, 64) == 0) && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        throw TestFailure("cannot bind 127.0.0.1:0")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
