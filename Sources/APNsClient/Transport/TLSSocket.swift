import COpenSSL
import Glibc

/// Owns one connection's socket and its TLS session (`SSL*`), and the encrypted output not yet written.
///
/// Made by `connect` (blocking, on a connector thread: DNS has no non-blocking form), then used only by the
/// event loop that serves the connection, never concurrently: non-blocking reads and coalesced writes.
/// `close()` (or `deinit`) frees the session and closes the socket.
final class TLSSocket {
    private(set) var fd: Int32
    private var ssl: OpaquePointer?
    /// Bytes waiting to be written, from `pending` on: everything one loop turn produced goes out in one
    /// `SSL_write` (measured: 150k POST/s on one connection coalesced, 65k/s frame by frame).
    private var output: [UInt8] = []
    private var pending = 0

    /// Takes ownership of a connected socket and its established TLS session.
    init(fd: Int32, ssl: OpaquePointer) {
        self.fd = fd
        self.ssl = ssl
    }

    deinit { close(clean: false) }

    enum ReadOutcome {
        /// `count` bytes were decrypted into the buffer.
        case data(count: Int)
        /// Nothing more now; wait for the socket.
        case wouldBlock
        /// The peer ended the session, or the read failed: why.
        case closed(String)
    }

    /// Decrypts what has arrived into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadOutcome {
        guard let ssl else { return .closed("connection closed") }
        ERR_clear_error()
        // At most one TLS record (≤ 16 KiB) per call, from what read-ahead buffered: the caller reads until
        // `.wouldBlock` or until nothing is buffered.
        let n = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if n > 0 { return .data(count: Int(n)) }
        let error = SSL_get_error(ssl, n)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wouldBlock
        case SSL_ERROR_ZERO_RETURN:
            return .closed("server closed the TLS session")
        default:
            let sslError = ERR_get_error()  // read now: it is thread-local state of this failed call.
            return .closed("TLS read failed (SSL error \(error), errno \(errno), OpenSSL \(sslError))")
        }
    }

    /// Whether the session holds input it has read from the socket and not yet returned (read-ahead took more
    /// than one record). When it does not, the socket says when more arrives (epoll is level-triggered), so
    /// the reader stops without the read(2) that would only return EAGAIN.
    var hasBufferedInput: Bool {
        guard let ssl else { return false }
        return SSL_has_pending(ssl) == 1
    }

    /// Bytes queued and not yet written.
    var unwritten: Int { output.count - pending }

    /// Queues bytes for the next `flush`.
    func enqueue(_ bytes: UnsafeBufferPointer<UInt8>) {
        output.append(contentsOf: bytes)
    }

    enum FlushOutcome: Equatable {
        /// Everything queued is written.
        case done
        /// The socket is full: wait until it is writable.
        case wouldBlock
        case failed(String)
    }

    /// Writes what is queued: `SSL_write` over the whole buffer (with `SSL_MODE_ENABLE_PARTIAL_WRITE` each call
    /// takes one TLS record, ≤ 16 KiB), again until everything is written or the socket is full.
    func flush() -> FlushOutcome {
        guard let ssl else { return unwritten > 0 ? .failed("connection closed") : .done }
        var n: Int32 = 0
        while unwritten > 0 {
            ERR_clear_error()
            let remaining = output.count - pending
            n = output.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + pending, Int32(clamping: remaining)) }
            guard n > 0 else { break }
            pending += Int(n)
        }
        if unwritten == 0 {
            output.removeAll(keepingCapacity: true)
            pending = 0
            return .done
        }
        if pending > 64 * 1024 && pending * 2 > output.count {
            output.removeFirst(pending)
            pending = 0
        }
        let error = SSL_get_error(ssl, n)
        switch error {
        case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
            return .wouldBlock
        default:
            let sslError = ERR_get_error()
            return .failed("TLS write failed (SSL error \(error), errno \(errno), OpenSSL \(sslError))")
        }
    }

    /// Frees the TLS session and closes the socket. `clean`: send close_notify first (best effort; only on an
    /// orderly close of an established session — after a failure the peer has usually gone).
    func close(clean: Bool) {
        if let ssl {
            if clean, SSL_is_init_finished(ssl) == 1 { SSL_shutdown(ssl) }
            SSL_free(ssl)
        }
        ssl = nil
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
