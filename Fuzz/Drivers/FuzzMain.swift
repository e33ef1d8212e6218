// libFuzzer driver of the Swift fuzz targets (built by Fuzz/fuzz.sh: swiftc -sanitize=fuzzer,address, linked with
// FuzzTargets and its dependencies as built in .build-fuzz). APNS_RELAY_FUZZ_TARGET names the target
// (`FuzzTarget`'s raw values); the logic is `FuzzTarget.run`, shared with the replay in `make test`.
import Dispatch
import Foundation
import FuzzTargets

private let target: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["APNS_RELAY_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("APNS_RELAY_FUZZ_TARGET='\(name)' is not one of \(names)\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerInitialize")
func fuzzerInitialize(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    _ = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    // libFuzzer's thread waits for the async entry; the targets' own work never waits on this thread.
    let done = DispatchSemaphore(value: 0)
    Task {
        await target.run(input)
        done.signal()
    }
    done.wait()
    return 0
}
