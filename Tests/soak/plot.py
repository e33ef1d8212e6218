#!/usr/bin/env python3
"""Draws the soak's samples (samples.csv) with its faults (faults.csv) marked, into soak.png beside them.

Usage: plot.py DIRECTORY   (what Tests/RelayTests/Soak/SoakTests.swift writes; `make soak` leaves it in
bench-results/soak). One panel per series of the leak watch, sharing the time axis; each fault is a shaded
span (or a line, for one act such as a kill) across every panel, numbered in the legend.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def column(rows, name):
    return [float(r[name]) if r[name] != "" else float("nan") for r in rows]


def main(directory):
    samples = read(os.path.join(directory, "samples.csv"))
    faults = read(os.path.join(directory, "faults.csv"))
    if not samples:
        sys.exit("no samples in " + directory)
    minutes = [float(r["seconds"]) / 60 for r in samples]
    results = column(samples, "results")
    produced = column(samples, "produced")
    seconds = [float(r["seconds"]) for r in samples]

    def rate(values):
        out = [float("nan")]
        for i in range(1, len(values)):
            dt = seconds[i] - seconds[i - 1]
            out.append((values[i] - values[i - 1]) / dt if dt > 0 else float("nan"))
        return out

    panels = [
        ("memory (MiB)", [("resident (RSS)", column(samples, "rss_mib")), ("C heap in use", column(samples, "heap_mib"))], False),
        ("descriptors, threads", [("descriptors", column(samples, "fds")), ("APNs sockets", column(samples, "apns_sockets")),
                                  ("Kafka sockets", column(samples, "kafka_sockets")), ("threads", column(samples, "threads")),
                                  ("of them libdispatch's", column(samples, "dispatch_threads"))], False),
        ("APNs connections", [("connections", column(samples, "connections"))], False),
        ("events", [("consumer lag", column(samples, "lag")), ("in flight", column(samples, "in_flight"))], False),
        ("events/s", [("produced", rate(produced)), ("results", rate(results))], False),
        ("p99 consume → result (ms)", [("p99", column(samples, "p99_ms"))], True),
    ]
    figure, axes = plt.subplots(len(panels), 1, figsize=(14, 2.3 * len(panels)), sharex=True)
    colours = plt.get_cmap("tab10")
    for n, fault in enumerate(faults):
        start, end = float(fault["start_s"]) / 60, float(fault["end_s"]) / 60
        label = f"{n + 1}. {fault['fault']}"
        for i, axis in enumerate(axes):
            if end - start > 0.05:
                axis.axvspan(start, end, color=colours(n % 10), alpha=0.18, label=label if i == 0 else None)
            else:
                axis.axvline(start, color=colours(n % 10), alpha=0.7, linestyle="--", label=label if i == 0 else None)
        axes[0].annotate(str(n + 1), (start, 1.0), xycoords=("data", "axes fraction"), fontsize=8, va="bottom")
    for axis, (title, series, log) in zip(axes, panels):
        for name, values in series:
            axis.plot(minutes, values, label=name, linewidth=1.2)
        axis.set_ylabel(title, fontsize=9)
        if log:
            axis.set_yscale("log")
        axis.grid(alpha=0.3)
        handles, labels = axis.get_legend_handles_labels()
        series_names = {name for name, _ in series}
        own = [(h, l) for h, l in zip(handles, labels) if l in series_names]
        axis.legend(*zip(*own), loc="upper left", fontsize=8)
    fault_handles = [(h, l) for h, l in zip(*axes[0].get_legend_handles_labels()) if l[0].isdigit()]
    if fault_handles:
        figure.legend(*zip(*fault_handles), loc="lower center", ncol=5, fontsize=8)
    axes[-1].set_xlabel("minutes")
    figure.suptitle(f"apns-relay soak: {len(samples)} samples over {minutes[-1]:.1f} min, {len(faults)} faults")
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    out = os.path.join(directory, "soak.png")
    figure.savefig(out, dpi=90)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
