import Foundation
import ReaddirGuard
import ServiceSupport
import KafkaMock

/// What a finished command printed.
package struct ProcessOutput: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String
}

/// Runs a command to its end with a deadline (killed and `TestFailure` after `timeout`). Its output is read
/// on dispatch threads: blocking reads on the cooperative pool would starve the test's own async work.
/// - Parameter check: throw `TestFailure` with stderr when the exit status is not 0 (else the caller
///   looks at `status`).
@discardableResult
package func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
    timeout: Duration = .seconds(60), check: Bool = false
) async throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let exited = TestSignal()
    process.terminationHandler = { _ in exited.raise() }
    try startProcess(process)
    async let stdout = readToEnd(out.fileHandleForReading)
    async let stderr = readToEnd(err.fileHandleForReading)
    let finished = await exited.wait(within: timeout)
    if !finished { process.terminate() }
    let output = ProcessOutput(
        status: finished ? process.terminationStatus : -1,
        stdout: String(decoding: await stdout, as: UTF8.self), stderr: String(decoding: await stderr, as: UTF8.self)
    )
    let command = ([executable] + arguments).joined(separator: " ")
    guard finished else { throw TestFailure("\(command) did not exit within \(timeout); stderr: \(output.stderr)") }
    if check, output.status != 0 { throw TestFailure("\(command) exited \(output.status): \(output.stderr)") }
    return output
}

/// Starts `process` under ``ForkGuard``: a child started while a mock Kafka broker goes down would make
/// librdkafka's mock abort the test process. Every process a test starts goes through here.
package func startProcess(_ process: Process) throws {
    _ = processRunOverReadGuard
    try ForkGuard.starting { () throws -> Void in try process.run() }
}

/// swift-corelibs-foundation's `Process.run()` on Linux (this toolchain, Swift 6.3) lists `/proc/self/fd`
/// and copies each entry's whole 256-byte `d_name`, over-reading glibc's 32 KiB readdir buffer by up to
/// ~230 bytes once a batch of entries fills it (over ~1300 descriptors open; the parallel suite reaches
/// 2500); when the buffer ends its heap mapping the test process dies ("Bad pointer dereference",
/// `__memcpy_avx512_unaligned_erms` in `Process.run`). Fixed upstream in swift-corelibs-foundation#5472.
/// An earlier mitigation (allocations of 16 KiB or more mapped on their own) narrowed the window but did
/// not close it: glibc maps a large allocation only when its arena's top cannot serve it, and a CI run
/// still died of it. The test process now has a readdir of its own (`ReaddirGuard`, C) that returns each
/// entry copied into a whole `struct dirent`, so the copy never leaves it; this checks, once, that the
/// guard is the readdir in use.
private let processRunOverReadGuard: Void = {
    let before = readdir_guard_served()
    if let directory = opendir("/proc/self/fd") {
        while readdir(directory) != nil {}
        closedir(directory)
    }
    precondition(readdir_guard_served() > before, "ReaddirGuard is not the process's readdir: Process.run may over-read and crash")
}()

/// Reads to the end, then closes the handle: a pipe otherwise stays open until Foundation happens to release
/// it, and a test that starts many processes ran out of descriptors that way.
private func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            let data = handle.readDataToEndOfFile()
            try? handle.close()
            continuation.resume(returning: data)
        }
    }
}

/// A fresh directory under the system's temporary directory; the caller removes it.
package func makeTemporaryDirectory(_ prefix: String = "apns-relay-tests") throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
