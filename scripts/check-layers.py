#!/usr/bin/env python3
"""The layering rules CI checks (ARCHITECTURE.md, "Invariants"):

1. Where the heavy and presentation crates may enter the build: each may be
   a direct dependency of the named emend crates only (`cargo tree -i`).
2. No source file is longer than 800 lines, not counting its `#[cfg(test)]`
   module (a file that is only compiled for tests does not count).

    python3 scripts/check-layers.py

Exit 0 when both hold; 1 with every breach, one per line.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# crate -> the only emend packages that may depend on it directly.
ALLOWED = {
    "clap": {"emend"},
    "clap_complete": {"emend"},
    "clap_mangen": {"emend"},
    "anstream": {"emend"},
    "anstyle": {"emend"},
    "indicatif": {"emend"},
    "comfy-table": {"emend"},
    "maud": {"emend-report"},
    "async-openai": {"emend-eval"},
    "tower-service": {"emend-eval"},
    "candle-core": {"emend-harness"},
    "tokenizers": {"emend-harness"},
    "sled": {"emend-journal"},
}

SOURCE_DIRS = ["engine/src", "core/src", "eval/src", "loop/src", "report/src", "harness/src", "journal/src", "stats/src"]
MAX_LINES = 800


def direct_dependents(krate):
    out = subprocess.run(
        ["cargo", "tree", "--workspace", "--all-features", "-e", "normal,build", "-i", krate, "--depth", "1", "--prefix", "none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return None  # not in the tree at all
    names = set()
    for line in out.stdout.splitlines()[1:]:
        name = line.split(" ")[0]
        if name.startswith("emend"):
            names.add(name)
    return names


def test_only_files(src):
    """Files declared as `#[cfg(test)] mod name;` (compiled only for tests)."""
    found = set()
    for f in src.rglob("*.rs"):
        text = f.read_text()
        here = f.parent if f.name in ("lib.rs", "main.rs", "mod.rs") else f.with_suffix("")
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
            for cand in (here / f"{m.group(1)}.rs", here / m.group(1) / "mod.rs"):
                if cand.exists():
                    found.add(cand)
    return found


def long_files():
    bad = []
    for d in SOURCE_DIRS:
        src = ROOT / d
        skip = test_only_files(src)
        for f in sorted(src.rglob("*.rs")):
            if f in skip:
                continue
            lines = 0
            for line in f.read_text().splitlines():
                if line.startswith("#[cfg(test)]"):
                    break
                lines += 1
            if lines > MAX_LINES:
                bad.append(f"{f.relative_to(ROOT)}: {lines} lines before its test module (at most {MAX_LINES})")
    return bad


def main():
    breaches = []
    for krate, allowed in sorted(ALLOWED.items()):
        deps = direct_dependents(krate)
        if deps is None:
            continue
        for name in sorted(deps - allowed):
            breaches.append(f"{name} depends on {krate} directly; only {', '.join(sorted(allowed))} may")
    breaches += long_files()
    for b in breaches:
        print(b)
    if breaches:
        print(f"{len(breaches)} layering rule(s) broken (ARCHITECTURE.md, Invariants)", file=sys.stderr)
        return 1
    print("layers ok: heavy crates enter only where allowed; no file over 800 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
