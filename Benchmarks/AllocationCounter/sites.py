#!/usr/bin/env python3
"""Names and sums the table that allocation-counter.c writes with BENCH_REFCOUNT_SITES_FILE set.

    sites.py <sites file> <relay binary> <events> [--top N] [--kind type|refcount|copy|clock|alloc] [--lines]

Per event (each count divided by <events>), for each kind: the total, then the top N rows (25 by default):
- type: retains and releases by the object's type (`type` lines). A metadata in the binary is named by its symbol
  (nm, the nearest at or below it; `+0x..` when inside a symbol that is not the type's metadata); one the runtime
  made (a generic instance) by its class's nominal type descriptor, `<…>` standing for the generic arguments; a
  closure context or box without a symbol by its kind. Rows with the same name are summed; each row ends with the
  metadata offsets it sums, the value to give BENCH_REFCOUNT_SITES_TYPE (an offset in the binary is the same in
  every run of that binary; one outside it, a metadata the runtime made, changes from run to run).
- refcount: retains and releases by call site (`refcount` lines), named by the site's function (addr2line -f,
  then swift demangle); for a site in the runtime or in compiler-made code (value witnesses, outlined copies,
  thunks), the names of its function's caller and their caller follow, after ` | `.
- copy: memcpy and memmove calls and their bytes by call site; clock: clock reads; alloc: allocations (the site
  is in the allocating function, swift_slowAlloc for Swift, so its two callers follow).
Rows with the same name are summed (with --lines, the site's file:line and offset are part of the name, so sites
stay apart; the offset is the call's, for objdump --start-address).
A site outside the binary is in a shared library (librdkafka, nghttp2, OpenSSL, libc): only that is known.

The counts are the process's since it started (the counter's file is written at every dump), start-up included:
over 100k events it adds ~0.2 per event to the retains' total (167.5 here against the benchmark's 167.3, which
excludes it), spread over many rows.
"""

import argparse
import bisect
import mmap
import os
import struct
import subprocess
import sys
from collections import defaultdict

KINDS = ["type", "refcount", "copy", "clock", "alloc"]

# MetadataKind.def (Swift runtime): the kinds of heap objects that are not class instances.
HEAP_KINDS = {
    0x400: "closure context or box",
    0x500: "generic box",
    0x501: "error box",
    0x502: "async task",
    0x503: "job",
}


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sites", help="the file BENCH_REFCOUNT_SITES_FILE named")
    parser.add_argument("binary", help="the relay binary that ran (the offsets are in it)")
    parser.add_argument("events", type=float, help="the events of the run: every count is divided by it")
    parser.add_argument("--top", type=int, default=25, help="rows per kind (default 25)")
    parser.add_argument("--kind", choices=KINDS, help="print only this kind")
    parser.add_argument("--lines", action="store_true", help="keep each site apart: its file:line (addr2line's, often <compiler-generated> for a retain)"
                        " and the offset of its call after its function's name")
    return parser.parse_args()


def read_sites(path):
    """The file's lines by kind: `type <metadata> <descriptor> <kind> <retains> <releases>`, the others
    `<kind> <site> <caller> <caller's caller> <count> <count>`; all offsets hex."""
    rows = defaultdict(list)
    with open(path) as file:
        for line in file:
            fields = line.split()
            if len(fields) != 6 or fields[0] not in KINDS:
                continue
            rows[fields[0]].append((int(fields[1], 16), int(fields[2], 16), int(fields[3], 16), int(fields[4]), int(fields[5])))
    return rows


class Binary:
    """The relay binary: its loaded segments (to read words of its data, and to tell an offset in it from one in a
    shared library or the heap), its symbols (nm), and names for code addresses (addr2line)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as file:
            self.data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        self.segments = self._load_segments()
        self.end = max((address + memory_size for address, _, _, memory_size in self.segments), default=0)
        self.symbols = self._symbols()
        self.symbol_addresses = [symbol[0] for symbol in self.symbols]
        self.functions = [symbol for symbol in self.symbols if symbol[2] in "tTwW"]
        self.function_addresses = [symbol[0] for symbol in self.functions]

    def _load_segments(self):
        # ELF64 little-endian: program headers of type PT_LOAD (1): (address, file offset, file size, memory size).
        if self.data[:4] != b"\x7fELF" or self.data[4] != 2:
            sys.exit(f"{self.path}: not a 64-bit ELF file")
        program_headers, = struct.unpack_from("<Q", self.data, 0x20)
        entry_size, count = struct.unpack_from("<HH", self.data, 0x36)
        segments = []
        for index in range(count):
            kind, _, offset, address, _, file_size, memory_size, _ = struct.unpack_from("<IIQQQQQQ", self.data, program_headers + index * entry_size)
            if kind == 1:
                segments.append((address, offset, file_size, memory_size))
        return segments

    def contains(self, offset):
        return 0 < offset < self.end

    def read_u32(self, offset):
        """The 32-bit word at `offset` as the file holds it, None where the file has none (.bss, outside)."""
        for address, file_offset, file_size, _ in self.segments:
            if address <= offset and offset + 4 <= address + file_size:
                return struct.unpack_from("<I", self.data, file_offset + offset - address)[0]
        return None

    def _symbols(self):
        output = subprocess.run(["nm", "-S", "-n", "--defined-only", self.path], capture_output=True, text=True, check=True).stdout
        symbols = []
        for line in output.splitlines():
            fields = line.split()
            if len(fields) == 4:
                symbols.append((int(fields[0], 16), int(fields[1], 16), fields[2], fields[3]))
            elif len(fields) == 3:
                symbols.append((int(fields[0], 16), None, fields[1], fields[2]))
        symbols.sort(key=lambda symbol: symbol[0])
        return symbols

    def symbol_at(self, offset):
        """The symbol at or below `offset` that holds it (by its size; one without a size only when exact), and how
        far into it `offset` is; None if none does."""
        index = bisect.bisect_right(self.symbol_addresses, offset) - 1
        # Several symbols may start at one address (aliases): prefer one whose size covers the offset.
        while index >= 0:
            address, size, _, name = self.symbols[index]
            if address == offset or (size is not None and offset < address + size):
                return name, offset - address
            if index > 0 and self.symbols[index - 1][0] == address:
                index -= 1
                continue
            return None
        return None

    def function_at(self, offset):
        index = bisect.bisect_right(self.function_addresses, offset) - 1
        return self.functions[index][3] if index >= 0 else None

    def functions_of(self, offsets):
        """Per code offset (a return address: the call is just before it): (function, file:line), mangled."""
        offsets = sorted(set(offsets))
        if not offsets:
            return {}
        output = subprocess.run(["addr2line", "-f", "-e", self.path], input="".join(f"{offset - 1:#x}\n" for offset in offsets),
                                capture_output=True, text=True, check=True).stdout.splitlines()
        found = {}
        for index, offset in enumerate(offsets):
            function, place = output[2 * index], output[2 * index + 1]
            if function == "??":
                function = self.function_at(offset - 1) or f"?? {offset:#x}"
            found[offset] = (function, place)
        return found


def demangle(names, simplified=True):
    """Swift names (swift demangle, compact, and simplified unless told), then C++ ones (c++filt, without parameters)."""
    names = list(names)
    if not names:
        return {}
    text = "".join(name.replace("\n", " ") + "\n" for name in names)
    swift = subprocess.run(["swift", "demangle", "--compact"] + (["--simplified"] if simplified else []), input=text, capture_output=True, text=True, check=True).stdout.splitlines()
    if len(swift) != len(names):
        swift = names
    cxx_indexes = [index for index, name in enumerate(swift) if name.startswith("_Z")]
    if cxx_indexes:
        try:
            cxx = subprocess.run(["c++filt", "-p"], input="".join(swift[index] + "\n" for index in cxx_indexes), capture_output=True, text=True, check=True).stdout.splitlines()
            if len(cxx) == len(cxx_indexes):
                for index, name in zip(cxx_indexes, cxx):
                    swift[index] = name
        except (OSError, subprocess.CalledProcessError):
            pass
    return dict(zip(names, swift))


# Functions whose callers say more than they do: the runtime's own (C and C++, and its swift_ entry points), the
# standard library's (module Swift, `$ss`, and its types' short forms, `$sS`: Array, String, Optional, …), and code
# the compiler makes for a type or a closure rather than for a line of the program.
COMPILER_MADE = ("outlined ", "value witness", "partial apply for ", "reabstraction thunk", "protocol witness for ",
                 "merged ", "thunk for ", "type metadata accessor")


def wants_callers(mangled, demangled):
    if not mangled.startswith("$s") or mangled.startswith("$ss") or mangled.startswith("$sS"):
        return True
    return any(marker in demangled for marker in COMPILER_MADE)


def name_sites(binary, rows, lines):
    """Per row (site, caller, caller's caller, first, second): its name."""
    offsets = {offset for row in rows for offset in row[:3] if binary.contains(offset)}
    functions = binary.functions_of(offsets)
    readable = demangle({function for function, _ in functions.values()})
    # The simplified names drop what says a function is a value witness (`destroy for T`): asked of the full ones.
    full = demangle({function for function, _ in functions.values()}, simplified=False)

    def name(offset, with_place=False):
        if offset == 0:
            return None
        if not binary.contains(offset):
            return "(shared library)"
        function, place = functions[offset]
        text = readable.get(function, function)
        if with_place:
            text += f" ({os.path.basename(place.split(' ')[0])} at {offset - 1:#x})"
        return text

    names = []
    for site, caller, caller2, _, _ in rows:
        text = name(site, lines)
        mangled = functions[site][0] if binary.contains(site) else None
        if mangled is None or wants_callers(mangled, full.get(mangled, mangled)):
            callers = [name(offset) for offset in (caller, caller2) if offset]
            if callers:
                text += " | " + " | ".join(callers)
        names.append(text)
    return names


def name_types(binary, rows):
    """Per type row (metadata, descriptor, kind, retains, releases): its name."""
    prefixes = ("full type metadata for ", "type metadata for ", "nominal type descriptor for ")
    wanted = []  # (row index, mangled symbol, offset into it, generic)
    names = [None] * len(rows)
    for index, (metadata, descriptor, kind, _, _) in enumerate(rows):
        found = binary.symbol_at(metadata) if binary.contains(metadata) else None
        described = binary.symbol_at(descriptor) if descriptor and binary.contains(descriptor) else None
        # A type's metadata symbol (`…N`, `…Mf`); a metadata the runtime made may lie in the binary too (its
        # first allocations come from a pool in .bss), inside a symbol that does not name it: then the descriptor.
        if found and (not described or found[0].startswith("$s") and found[0].endswith(("N", "Mf"))):
            wanted.append((index, found[0], found[1], False))
        elif described:
            flags = binary.read_u32(descriptor)
            # ContextDescriptorFlags: bit 7, the type is generic (its arguments are in the metadata, not named here).
            wanted.append((index, described[0], described[1], flags is not None and bool(flags & 0x80)))
        else:
            label = HEAP_KINDS.get(kind, "metadata of kind 0x0 (class)" if kind == 0 else f"metadata of kind {kind:#x}")
            names[index] = f"{label} {metadata:#x}" if binary.contains(metadata) else f"{label} (made at run time)"
    symbols = {symbol for _, symbol, _, _ in wanted}
    simple, full = demangle(symbols), demangle(symbols, simplified=False)

    def type_name(symbol, readable):
        text = readable.get(symbol, symbol)
        for prefix in prefixes:
            if text.startswith(prefix):
                return text[len(prefix):], True
        return text, False

    # Types of different modules with one simple name (CoreMetrics.Gauge and Prometheus.Gauge) keep their modules.
    by_simple_name = defaultdict(set)
    for symbol in symbols:
        text, is_type = type_name(symbol, simple)
        by_simple_name[text].add(type_name(symbol, full)[0] if is_type else symbol)
    for index, symbol, into, generic in wanted:
        text, is_type = type_name(symbol, simple)
        if is_type and len(by_simple_name[text]) > 1:
            text = type_name(symbol, full)[0]
        if is_type:
            into = 0  # the type's metadata (its address point may be past the start of its full metadata) or descriptor
        names[index] = text + ("<…>" if generic else "") + (f"+{into:#x}" if into else "")
    return names


def per_event(value, events):
    return value / events


def table(title, rows, names, columns, events, top, extra=None):
    """Sums rows by name, prints the totals and the top rows. `columns`: (heading, function of the summed counts)."""
    summed = defaultdict(lambda: [0, 0])
    keys = defaultdict(list)
    for row, name in zip(rows, names):
        summed[name][0] += row[3]
        summed[name][1] += row[4]
        if extra:
            keys[name].append(row)
    total = [sum(row[3] for row in rows), sum(row[4] for row in rows)]
    order = sorted(summed, key=lambda name: -(columns[0][1](summed[name])))
    print(f"{title}: " + ", ".join(f"{heading} {per_event(function(total), events):.2f}" for heading, function in columns)
          + f" per event ({len(summed)} rows, {len(rows)} entries)")
    widths = [max(12, len(heading) + 2) for heading, _ in columns]
    print("  " + "".join(f"{heading:>{width}}" for (heading, _), width in zip(columns, widths)) + "  name")
    for name in order[:top]:
        counts = summed[name]
        line = "  " + "".join(f"{per_event(function(counts), events):{width}.2f}" for (_, function), width in zip(columns, widths)) + f"  {name}"
        if extra:
            line += extra(keys[name])
        print(line)
    print()
    return total


def main():
    arguments = parse_arguments()
    rows = read_sites(arguments.sites)
    binary = Binary(arguments.binary)
    events = arguments.events
    chosen = [arguments.kind] if arguments.kind else KINDS
    refcount_columns = [("retains+releases", lambda c: c[0] + c[1]), ("retains", lambda c: c[0]), ("releases", lambda c: c[1])]

    type_names = name_types(binary, rows["type"]) if rows["type"] else []

    def metadata_offsets(type_rows):
        # The largest first: the one to give BENCH_REFCOUNT_SITES_TYPE.
        offsets = [f"{row[0]:#x}" for row in sorted(type_rows, key=lambda row: -(row[3] + row[4]))]
        return "  [metadata " + ", ".join(offsets[:3]) + (f", … {len(offsets) - 3} more" if len(offsets) > 3 else "") + "]"

    if "type" in chosen:
        if rows["type"]:
            table("refcount by type", rows["type"], type_names, refcount_columns, events, arguments.top, extra=metadata_offsets)
        else:
            print("refcount by type: no `type` lines (a counter built before they were added?)\n")
    if "refcount" in chosen:
        total = table("refcount by site", rows["refcount"], name_sites(binary, rows["refcount"], arguments.lines), refcount_columns, events, arguments.top)
        type_total = [sum(row[3] for row in rows["type"]), sum(row[4] for row in rows["type"])]
        if rows["type"] and total != type_total:
            # BENCH_REFCOUNT_SITES_TYPE was set: the type whose counts the sites' add up to is the one.
            matching = [name for row, name in zip(rows["type"], type_names) if [row[3], row[4]] == total]
            which = f" to {matching[0]}" if len(matching) == 1 else ""
            print(f"  (the sites count {per_event(sum(total), events):.2f} of {per_event(sum(type_total), events):.2f} retains+releases per event:"
                  f" restricted{which} with BENCH_REFCOUNT_SITES_TYPE, or sites beyond the table)\n")
    if "copy" in chosen:
        table("copies by site", rows["copy"], name_sites(binary, rows["copy"], arguments.lines),
              [("copies", lambda c: c[0]), ("bytes", lambda c: c[1])], events, arguments.top)
    if "clock" in chosen:
        table("clock reads by site", rows["clock"], name_sites(binary, rows["clock"], arguments.lines), [("reads", lambda c: c[0])], events, arguments.top)
    if "alloc" in chosen:
        table("allocations by site", rows["alloc"], name_sites(binary, rows["alloc"], arguments.lines), [("allocations", lambda c: c[0])], events, arguments.top)


if __name__ == "__main__":
    main()
