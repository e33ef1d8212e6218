import APNsCore
import NIOCore
import NIOHTTP2
import NIOSSL

/// Connection-level actions, driven by the handler itself and by `APNsMockServer` commands (on the
/// connection's event loop).
extension APNsConnectionHandler {
    /// Sends SETTINGS MAX_CONCURRENT_STREAMS.
    func advertise(maxConcurrentStreams: Int) {
        guard context != nil, !closed else { return }
        unacknowledgedStreamLimits.append(maxConcurrentStreams)
        emit(
            HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([.init(parameter: .maxConcurrentStreams, value: maxConcurrentStreams)])))
        )
    }

    /// Sends GOAWAY (NO_ERROR, `{"reason":…}`); streams above `lastStreamID` (default: the highest stream
    /// answered or open) are dropped unprocessed. The connection closes once the rest are answered.
    func goAway(lastStreamID: HTTP2StreamID? = nil, reason: String) {
        guard goAwayLastStreamID == nil else { return }
        let last = lastStreamID ?? highestStreamID
        goAwayLastStreamID = last
        streams = streams.filter { $0.key <= last }
        var debug = context?.channel.allocator.buffer(capacity: 32) ?? ByteBuffer()
        debug.writeString("{\"reason\":\"\(reason)\"}")
        emit(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: debug)))
        server.observations.update { $0.goAwaysSent += 1 }
        closeIfDrained()
    }

    /// Lowers or raises MAX_CONCURRENT_STREAMS on this connection now.
    func setMaxConcurrentStreams(_ value: Int) {
        streamLimitRaised = true
        advertise(maxConcurrentStreams: value)
    }

    /// Abrupt close by a fault command (`closeAllConnections`), counted in `droppedConnections` when the
    /// connection was still open.
    func dropByCommand() {
        guard !closed else { return }
        server.observations.update { $0.droppedConnections += 1 }
        closeAbruptly()
    }

    /// Abrupt close, no GOAWAY.
    func closeAbruptly() {
        closed = true
        outbox.removeAll()
        context?.close(promise: nil)
    }

    /// Writes pending output; used after commands that run outside a read batch.
    func flushFromCommand() {
        loadBatchSettings()
        flushOutput(returnAllCredit: true)
        batchLoaded = false
    }
}
