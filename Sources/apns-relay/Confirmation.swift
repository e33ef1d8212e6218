import Foundation
import ServiceSupport

/// The yes/no question a command asks before it writes or deletes, when no `--yes` was given: asked only when
/// someone is there to answer, so a script or a job without `--yes` never blocks on it (and never acts).
enum Confirmation {
    /// Whether someone can answer: standard input is a terminal, and so is standard error, where the question
    /// goes (a command whose error output is captured is run by a program, even from a terminal).
    static var canAsk: Bool { isatty(STDIN_FILENO) != 0 && isatty(STDERR_FILENO) != 0 }

    /// Asks `question` on standard error and reads one line: `true` for `y` or `yes` (any case), `false` for
    /// anything else, the end of input, or no answer within `timeout`.
    ///
    /// The line is read on a thread of its own: `readLine` blocks, and must not hold a thread of the
    /// cooperative pool. After a timeout that thread stays blocked in `readLine` until the process exits,
    /// which it is about to.
    static func ask(_ question: String, timeout: Duration = .seconds(600)) async -> Bool {
        FileHandle.standardError.write(Data("\(question) [y/N] ".utf8))
        let answer = Latch<Bool>()
        let reader = Thread {
            let line = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased()
            answer.set(line == "y" || line == "yes")
        }
        reader.name = "apns-relay.confirmation"
        reader.start()
        return await answer.wait(timeout: timeout, ignoringCancellation: true) ?? false
    }
}
