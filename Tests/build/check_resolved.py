#!/usr/bin/env python3
"""Package.resolved agrees with Package.swift: the image is built from it (`swift build --force-resolved-versions`),
so a stale file breaks the image build, and a file that drifted builds other code than the tests ran.

Checks, in a copy of the package under .build-resolved/ (Package.swift and Package.resolved copied, the folders
linked; the working tree and its .build are left alone, and the copy's checkouts are reused by the next run):
  - SwiftPM resolves from the file alone (`--force-resolved-versions`): every dependency, direct or transitive, is
    pinned, and every pin satisfies the requirements of the manifests that name it;
  - every dependency Package.swift names (`swift package dump-package`) is pinned, at a version its requirement
    admits, from the same repository;
  - nothing is pinned that the dependency graph (`swift package show-dependencies`) does not reach;
  - each pin's revision is the commit its version tag names in that repository;
  - the file is byte-identical afterwards.

The pinned revisions are those of the repositories SwiftPM read when the file was resolved. On this project's build
machines github.com is read from a local mirror whose commit ids are not GitHub's: the committed file resolves there,
and where github.com itself is read SwiftPM cannot check those revisions out, which the first check reports (README,
"Container image", says how to re-pin the same versions).

Exit status is non-zero when anything fails; the last line reads "N passed, N failed".
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWIFT = os.environ.get("SWIFT", "swift")
WORK = ROOT / ".build-resolved"
# The first resolution clones the packages and compiles their manifests (about 16 s of CPU); later ones reuse them
# (about 1 s). A hang still ends.
TIMEOUT = 300
# Not linked into the copy: build outputs, git, local tooling, and the two files under test (copied).
SKIP = re.compile(r"^(\.build.*|\.git|\.swiftpm|\.venv|Package\.swift|Package\.resolved)$")


def version_key(text: str) -> tuple:
    """Semantic-version order: numeric core, then a release above its pre-releases; build metadata ignored."""
    core, _, pre = text.split("+", 1)[0].partition("-")
    numbers = tuple(int(part) for part in core.split("."))
    numbers += (0,) * (3 - len(numbers))
    tags = tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in pre.split(".")) if pre else ()
    return numbers + ((1,) if not pre else (0,) + tags,)


def admits(requirement: dict, version: str) -> tuple[bool, str]:
    """Whether a dump-package requirement admits `version`, and the requirement in words."""
    if "range" in requirement:
        bounds = requirement["range"][0]
        low, high = bounds["lowerBound"], bounds["upperBound"]
        return version_key(low) <= version_key(version) < version_key(high), f"{low} ..< {high}"
    if "exact" in requirement:
        return version == requirement["exact"][0], f"exactly {requirement['exact'][0]}"
    return False, f"{requirement} (not a version requirement; pin it by version)"


def normalized(location: str) -> str:
    return location.lower().rstrip("/").removesuffix(".git")


def swiftpm(package: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SWIFT, "package", "--package-path", str(package), "--scratch-path", str(package / ".build"), *arguments],
        capture_output=True, text=True, timeout=TIMEOUT)


def main() -> int:
    passed = 0
    failed = 0

    def ok(label):
        nonlocal passed
        passed += 1

    def fail(label, why):
        nonlocal failed
        failed += 1
        print(f"FAIL {label}: {why}")

    def summary() -> int:
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0

    resolved_file = ROOT / "Package.resolved"
    if not resolved_file.is_file():
        fail("Package.resolved", "missing: generate it with `swift package resolve` and commit it")
        return summary()
    original = resolved_file.read_bytes()
    pins = {pin["identity"]: pin for pin in json.loads(original)["pins"]}

    package = WORK / "package"
    package.mkdir(parents=True, exist_ok=True)
    for entry in package.iterdir():
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
        elif entry.name != ".build":
            shutil.rmtree(entry)
    shutil.copy2(ROOT / "Package.swift", package / "Package.swift")
    shutil.copy2(resolved_file, package / "Package.resolved")
    for entry in ROOT.iterdir():
        if not SKIP.match(entry.name):
            (package / entry.name).symlink_to(entry)

    run = swiftpm(package, "--force-resolved-versions", "show-dependencies", "--format", "json")
    if run.returncode != 0:
        # SwiftPM names the copy; the file it means is the project's.
        lines = run.stderr.replace(str(package), str(ROOT)).splitlines()
        errors = [line for line in lines if "error" in line] or lines[-5:]
        fail("Package.resolved", "SwiftPM cannot build from it as it is: " + " ".join(errors)
             + " (after changing Package.swift: `swift package resolve`, then commit Package.resolved)")
        return summary()
    ok("resolution")
    graph = json.loads(run.stdout)

    run = swiftpm(package, "dump-package")
    if run.returncode != 0:
        fail("Package.swift", "dump-package failed: " + run.stderr.strip()[-500:])
        return summary()
    manifest = json.loads(run.stdout)

    # Every dependency Package.swift names: pinned, from its repository, at a version it admits.
    for dependency in manifest["dependencies"]:
        kind, [details] = next(iter(dependency.items()))
        identity = details["identity"]
        label = f"Package.swift dependency {identity}"
        if kind != "sourceControl" or "remote" not in details["location"]:
            fail(label, f"a {kind} dependency; this check knows remote source control only")
            continue
        location = details["location"]["remote"][0]["urlString"]
        pin = pins.get(identity)
        if pin is None:
            fail(label, "not pinned in Package.resolved")
            continue
        if normalized(pin["location"]) != normalized(location):
            fail(label, f"pinned from {pin['location']}, Package.swift names {location}")
            continue
        version = pin["state"].get("version")
        if version is None:
            fail(label, f"pinned by {pin['state']}, not by a version")
            continue
        admitted, words = admits(details["requirement"], version)
        if admitted:
            ok(label)
        else:
            fail(label, f"pinned at {version}, Package.swift requires {words}")

    # Nothing pinned that the graph does not reach; every pin's revision is its version tag's commit.
    reached = {}
    stack = list(graph["dependencies"])
    while stack:
        node = stack.pop()
        reached.setdefault(node["identity"], node)
        stack.extend(node["dependencies"])
    for identity, pin in sorted(pins.items()):
        label = f"pin {identity}"
        node = reached.get(identity)
        if node is None:
            fail(label, "pinned, but nothing in the dependency graph needs it: remove the pin "
                 "(`swift package resolve` after deleting Package.resolved writes only what is needed)")
            continue
        version, revision = pin["state"].get("version"), pin["state"].get("revision")
        if version is None:
            fail(label, f"pinned by {pin['state']}, not by a version")
            continue
        tag = subprocess.run(["git", "-C", node["path"], "rev-parse", "--verify", "-q", f"{version}^{{commit}}"],
                             capture_output=True, text=True, timeout=60)
        if tag.returncode != 0:
            fail(label, f"{pin['location']} has no tag {version}")
        elif tag.stdout.strip() != revision:
            fail(label, f"revision {revision} is not what tag {version} names in {pin['location']} as read here "
                 f"({tag.stdout.strip()}): the file was resolved against other copies of the packages, or edited")
        else:
            ok(label)
    for identity in sorted(set(reached) - set(pins)):
        fail(f"dependency {identity}", "in the graph but not pinned")

    if (package / "Package.resolved").read_bytes() != original or resolved_file.read_bytes() != original:
        fail("Package.resolved", "changed by resolution: run `swift package resolve` and commit the result")
    else:
        ok("unchanged")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
