#!/usr/bin/env python3
"""No public item that nothing uses.

Lists every `pub` item (fn, struct, enum, trait, const, static, type) of the
library crates and fails when its name appears nowhere but in its definition
and its own crate's unit tests. A use is the name anywhere in the workspace's
other non-test code (sources, benches), in the crate's integration tests
(`tests/`), or in another crate's tests. An item without one is dead, or
public only for a unit test that could reach it privately: delete it or make
it private.

A textual check, so it errs towards passing: a name that another item shares
(`new`, `run`) counts as used. Items and modules under a cfg naming a test
(`test`, the `test-support` feature) are test support and are not listed.

Usage: scripts/check-unused-pub.py [WORKSPACE]
       scripts/check-unused-pub.py --self-test   (it fails on a made-up unused item)
"""

import pathlib
import re
import sys

CRATES = ["core", "eval", "loop", "report", "harness", "journal", "stats"]

ITEM = re.compile(
    r"^\s*pub\s+(?:const\s+fn|async\s+fn|unsafe\s+fn|fn|struct|enum|trait|const|static|type)\s+([A-Za-z_][A-Za-z0-9_]*)"
)
GATED_MOD = re.compile(r"#\[cfg\([^\]]*test[^\]]*\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def count(text: str, into: dict) -> None:
    for w in WORD.findall(text):
        into[w] = into.get(w, 0) + 1


def test_only_files(root: pathlib.Path) -> set:
    """Source files of modules declared under a cfg that names test (`test`, `test-support`)."""
    out = set()
    for path in root.rglob("*.rs"):
        if "target" in path.parts:
            continue
        base = path.parent if path.name in ("lib.rs", "mod.rs", "main.rs") else path.with_suffix("")
        for name in GATED_MOD.findall(path.read_text(encoding="utf-8")):
            out.add(base / f"{name}.rs")
            out.update((base / name).rglob("*.rs"))
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    gated = test_only_files(root)
    product: dict[str, int] = {}
    unit_tests: dict[str, dict] = {}  # crate -> words of its #[cfg(test)] code and test-only modules
    integration: dict[str, dict] = {}  # crate -> words of its tests/ directory
    for path in sorted(root.rglob("*.rs")):
        rel = path.relative_to(root)
        if "target" in rel.parts or ".git" in rel.parts:
            continue
        krate, text = rel.parts[0], path.read_text(encoding="utf-8")
        if "tests" in rel.parts:
            count(text, integration.setdefault(krate, {}))
        elif path in gated:
            count(text, unit_tests.setdefault(krate, {}))
        else:
            body, _, tests = text.partition("#[cfg(test)]")
            count(body, product)
            count(tests, unit_tests.setdefault(krate, {}))
    unused = []
    for krate in CRATES:
        for path in sorted((root / krate / "src").rglob("*.rs")):
            if path in gated:
                continue
            lines = path.read_text(encoding="utf-8").partition("#[cfg(test)]")[0].splitlines()
            for n, line in enumerate(lines, 1):
                m = ITEM.match(line)
                if not m or (n > 1 and "cfg(" in lines[n - 2] and "test" in lines[n - 2]):
                    continue
                name = m.group(1)
                used = (
                    product.get(name, 0) > 1
                    or integration.get(krate, {}).get(name, 0) > 0
                    or any(words.get(name, 0) > 0 for other, words in unit_tests.items() if other != krate)
                    or any(words.get(name, 0) > 0 for other, words in integration.items() if other != krate)
                )
                if not used:
                    unused.append(f"{path.relative_to(root)}:{n}: pub {name}: nothing but its own crate's unit tests uses it")
    for line in unused:
        print(line)
    if unused:
        print(f"{len(unused)} public item(s) nothing uses: delete them, or make them private to their tests")
        return 1
    print("public items: every one is used beyond its definition")
    return 0


def self_test() -> int:
    """The check on a made-up workspace: it passes an item another crate
    uses and fails one only its own unit tests use."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "core/src").mkdir(parents=True)
        (root / "loop/src").mkdir(parents=True)
        (root / "core/src/lib.rs").write_text(
            "pub fn used_elsewhere() {}\npub fn only_tested() {}\n#[cfg(test)]\nmod t { fn f() { only_tested(); } }\n"
        )
        (root / "loop/src/lib.rs").write_text("fn g() { used_elsewhere(); }\n")
        run = subprocess.run([sys.executable, __file__, tmp], capture_output=True, text=True)
    if run.returncode == 1 and "pub only_tested" in run.stdout and "used_elsewhere" not in run.stdout:
        print("self-test: the check fails an unused item and passes a used one")
        return 0
    print(f"self-test failed (exit {run.returncode}):\n{run.stdout}{run.stderr}")
    return 1


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
