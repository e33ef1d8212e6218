import Dispatch
import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to 127.0.0.1 driven byte by byte, for the peers no HTTP client plays: one that sends
/// nothing, half a request, a request too large, or trickles.
///
/// Blocking calls (the waits) run on a dispatch thread, never on the test's cooperative pool.
// @unchecked Sendable: the descriptor is written once, in init; send and recv on a socket are thread-safe.
final class RawTCPPeer: @unchecked Sendable {
    let descriptor: Int32

    /// Connects; at most `timeout` (a listener whose accept queue is full leaves the handshake unfinished).
    init(port: Int, timeout: Duration = .seconds(2)) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let descriptor = self.descriptor
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let problem = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw TestFailure("cannot connect to 127.0.0.1:\(port): \(problem)")
        }
    }

    /// Sends all of `text`.
    /// - Returns: `false` if the peer is gone (reset, or the connection closed).
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    /// Reads until the server closes the connection, or `timeout`, waiting on the socket (poll).
    /// - Returns: what the server sent, and whether it closed (end of stream or reset) within `timeout`.
    func readUntilClosed(within timeout: Duration) async -> (received: String, closed: Bool) {
        let descriptor = self.descriptor
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let deadline = ContinuousClock.now + timeout
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 16384)
                while true {
                    let left = deadline - ContinuousClock.now
                    guard left > .zero else { break }
                    let milliseconds = Int32(
                        min(
                            left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1,
                            60_000))
                    var event = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                    let ready = poll(&event, 1, milliseconds)
                    if ready < 0 && errno == EINTR { continue }
                    guard ready > 0 else { continue }
                    let n = recv(descriptor, &buffer, buffer.count, 0)
                    if n > 0 {
                        received += buffer[0..<n]
                        continue
                    }
                    if n < 0 && errno == EINTR { continue }
                    return continuation.resume(returning: (String(decoding: received, as: UTF8.self), true))
                }
                continuation.resume(returning: (String(decoding: received, as: UTF8.self), false))
            }
        }
    }

    deinit { Glibc.close(descriptor) }
}

/// Lowers the descriptor limit of process `pid` (`prlimit`, util-linux) so that it can open `headroom` more
/// descriptors and no more: the kernel hands out the lowest free number and refuses one at or above the limit,
/// so the limit is set just above the `headroom`-th free number.
func limitDescriptors(ofProcess pid: Int32, headroom: Int) throws {
    let open = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap { Int($0) })
    var limit = 0
    var free = 0
    while free < headroom {
        if !open.contains(limit) { free += 1 }
        limit += 1
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
    process.arguments = ["--pid", String(pid), "--nofile=\(limit):\(limit)"]
    try startProcess(process)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw TestFailure("prlimit --pid \(pid) --nofile=\(limit) failed") }
}
