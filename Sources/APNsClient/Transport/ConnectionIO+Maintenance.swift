import APNsCore
import CNGHTTP2
import COpenSSL
import Glibc
import Logging
import ServiceSupport

/// Timers of the I/O loop: token refresh, request deadlines, keepalive PINGs, stream-id retirement.
extension ConnectionIO {
    func refreshToken() {
        guard let token else { return }
        let now = token.clock.nowSeconds()
        guard now != lastTokenCheck else { return }
        lastTokenCheck = now
        do {
            let candidate = try token.signer.token(now: now)
            if let current = currentToken {
                guard token.policy.shouldSwitch(current: current, adoptedAt: tokenAdoptedAt, candidate: candidate, now: now) else { return }
                onEvent(.tokenRotated)
            }
            currentToken = candidate
            tokenAdoptedAt = now
            authorization = Array(candidate.authorization.utf8)
        } catch {
            logger.error("cannot sign the provider token: \(error)")
        }
    }

    func expireDeadlines(now: ContinuousClock.Instant) {
        var next = now.advanced(by: .seconds(3600))
        for r in queue where !r.isCompleted {
            if r.cancelled.load(ordering: .acquiring) {
                completedSincePublish += 1
                r.completeCancelled()
            } else if r.deadline <= now {
                finish(r, .failure(APNsClientError(transport: .notSent, "deadline passed while queued for a stream")))
                timeoutsSincePublish += 1
            } else if r.deadline < next { next = r.deadline }
        }
        var expired: [Int32] = []
        var cancelled: [Int32] = []
        for (id, r) in streams {
            if r.cancelled.load(ordering: .acquiring) {
                cancelled.append(id)
            } else if r.deadline <= now { expired.append(id) } else if r.deadline < next { next = r.deadline }
        }
        for id in cancelled {
            guard let r = streams.removeValue(forKey: id) else { continue }
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
            completedSincePublish += 1
            r.completeCancelled()
        }
        for id in expired {
            guard let r = streams.removeValue(forKey: id) else { continue }
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
            finish(r, .failure(APNsClientError(transport: .timedOut, "no response before the deadline")))
            timeoutsSincePublish += 1
        }
        // A timeout is a reason to suspect the connection: check it is alive.
        if !expired.isEmpty && pingSentAt == nil { sendPing(now: now) }
        nextDeadlineScan = next
    }

    func keepalive(now: ContinuousClock.Instant) {
        if let sent = pingSentAt {
            if now - sent >= connection.configuration.pingTimeout {
                fatal = (.connectionLost, "PING not answered within \(connection.configuration.pingTimeout)")
            }
        } else if settingsReceived && now - lastReceive >= connection.configuration.pingInterval {
            sendPing(now: now)
        }
    }

    func sendPing(now: ContinuousClock.Instant) {
        if nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) == 0 { pingSentAt = now }
    }

    /// No new stream can be opened (or soon none could): stop taking requests, hand the queued ones back as
    /// never processed (the pool resends them on another connection), finish the open streams, close.
    func retireForStreamIDs() {
        guard !streamIDsUsedUp else { return }
        streamIDsUsedUp = true
        logger.notice("connection retiring: its HTTP/2 stream ids are (nearly) used up", metadata: [
            "next-stream-id": "\(nghttp2_session_get_next_stream_id(session))",
        ])
        connection.shared.withLock { $0.drainRequested = true; $0.load.retired = true }
        failQueued(.notProcessed, "connection used up its stream ids")
    }
}
