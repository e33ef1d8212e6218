#!/usr/bin/env python3
"""Helpers for Benchmarks/stable-identity.sh, standard library only.

  stream.py events --rate R --seconds S
      Prints one keyed event a line (key, a tab, the event's JSON) at R events/s for at most S seconds, for
      `kcat -P -K '\t'`. Paced against the monotonic clock, so a slow write is caught up, not lost.

  stream.py stamp --out FILE [--arm FILE --stopped FILE]
      Reads a reader's lines (kcat -u) and writes each to FILE prefixed with its receive time (Unix seconds).
      With --arm: when the arm file holds a process id, the next line that arrives sends that process SIGSTOP
      at once, writes the time to the stopped file and removes the arm file. A record that a read_uncommitted
      reader has just received belongs to a transaction being written now, which stays open only for the few
      broker round trips to its commit: stopping the relay from here, with no shell in between, catches it
      open in most tries (the script checks, and tries again at a later record otherwise).
"""
import argparse
import os
import signal
import sys
import time


def token(n):
    # 64 hex digits, distinct per event: the mock APNs accepts any well-formed token it was not told is gone.
    return ("%016x" % (((n + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)) * 4


def events(rate, seconds):
    out = sys.stdout
    start = time.monotonic()
    n = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            return
        due = int((now - start) * rate) + 1
        while n < due:
            key = "e%d" % n
            out.write('%s\t{"id":"%s","deviceToken":"%s","topic":"com.example.app","pushType":"alert",'
                      '"environment":"production","payload":{"aps":{"alert":{"title":"Hello","body":"World"}}}}\n'
                      % (key, key, token(n)))
            n += 1
        out.flush()
        time.sleep(max(0.0, start + n / rate - time.monotonic()))


def stamp(path, arm, stopped):
    source = sys.stdin.buffer
    with open(path, "ab", buffering=0) as out:
        while True:
            line = source.readline()
            if not line:
                return
            received = time.time()
            out.write(b"%.6f %s" % (received, line))
            if arm and os.path.exists(arm):
                try:
                    with open(arm) as f:
                        pid = int(f.read().strip() or "0")
                    os.remove(arm)
                except (OSError, ValueError):
                    continue
                if pid > 0:
                    os.kill(pid, signal.SIGSTOP)
                    with open(stopped, "w") as f:
                        f.write("%.6f\n" % time.time())


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    e = commands.add_parser("events")
    e.add_argument("--rate", type=float, required=True)
    e.add_argument("--seconds", type=float, required=True)
    s = commands.add_parser("stamp")
    s.add_argument("--out", required=True)
    s.add_argument("--arm")
    s.add_argument("--stopped")
    args = parser.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.command == "events":
        events(args.rate, args.seconds)
    else:
        stamp(args.out, args.arm, args.stopped)


if __name__ == "__main__":
    main()
