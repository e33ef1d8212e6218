#!/usr/bin/env python3
"""Independent check of Schemas/: every schema is a valid draft-07 schema, every example under
Schemas/examples/<schema>/valid validates and every counter-example under .../invalid does not.

Uses Python's `jsonschema` (Draft7Validator), a different implementation from the relay's own
(simdjson + Swift rules, valijson). Examples under .../invalid-beyond-schema break rules the relay
adds beyond JSON Schema (duplicate keys, byte order mark, depth, integer spelling); JSON Schema cannot
express those, so they are only checked to exist here and are exercised by the Swift tests.

Exit status is non-zero when anything fails; the last line reads "N passed, N failed".
"""
import json
import pathlib
import sys

from jsonschema import Draft7Validator

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "Schemas"


def undocumented(schema, path=""):
    """Property paths in `schema` without a description (the schemas are documentation for producers)."""
    missing = []
    for name, sub in schema.get("properties", {}).items():
        where = f"{path}/{name}"
        if not isinstance(sub, dict) or not sub.get("description"):
            missing.append(where)
        if isinstance(sub, dict):
            missing += undocumented(sub, where)
    return missing


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

    schema_files = sorted(SCHEMAS.glob("*.schema.json"))
    if not schema_files:
        fail("Schemas/", "no *.schema.json files found")
    for schema_file in schema_files:
        name = schema_file.name[: -len(".schema.json")]
        label = schema_file.relative_to(ROOT)
        try:
            schema = json.loads(schema_file.read_text(encoding="utf-8"))
            Draft7Validator.check_schema(schema)
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            fail(label, f"not a valid draft-07 schema: {error}")
            continue
        if schema.get("$schema") != "http://json-schema.org/draft-07/schema#":
            fail(label, "$schema is not draft-07")
        elif not schema.get("$id") or not schema.get("title") or not schema.get("description"):
            fail(label, "needs $id, title and description")
        elif undocumented(schema):
            fail(label, "properties without a description: " + ", ".join(undocumented(schema)))
        else:
            ok(label)
        validator = Draft7Validator(schema)
        example_dir = SCHEMAS / "examples" / name
        for kind, should_pass in (("valid", True), ("invalid", False)):
            files = sorted((example_dir / kind).glob("*.json"))
            if not files:
                fail(f"{label} {kind}", f"no examples in {example_dir / kind}")
            for example in files:
                elabel = example.relative_to(ROOT)
                try:
                    instance = json.loads(example.read_text(encoding="utf-8"))
                except Exception as error:  # noqa: BLE001
                    fail(elabel, f"not JSON: {error}")
                    continue
                errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
                if should_pass and errors:
                    fail(elabel, "should validate but: " + "; ".join(
                        f"/{'/'.join(map(str, e.path))}: {e.message}" for e in errors))
                elif not should_pass and not errors:
                    fail(elabel, "should not validate but does")
                else:
                    ok(elabel)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
