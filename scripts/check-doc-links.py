#!/usr/bin/env python3
"""Every relative link in README.md, ARCHITECTURE.md and docs/*.md names a
file that exists, every doc under docs/ is linked from README.md, and every
repository path docs/seeds.md cites in backticks exists.

One line per broken link (file:line: what), exit 1 when there is any."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"`((?:[a-z_]+/)+[A-Za-z0-9_.-]+\.[a-z]+)`")
CRATES = ("engine/", "core/", "eval/", "loop/", "report/", "harness/", "journal/", "stats/",
          "schemas/", "strategies/", "examples/", "scripts/", "docs/")


def main() -> int:
    errors = []
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                path = (page.parent / target.split("#")[0]).resolve()
                if not path.exists():
                    errors.append(f"{page.relative_to(ROOT)}:{n}: link to {target}, which does not exist")
    readme = (ROOT / "README.md").read_text()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if f"(docs/{doc.name}" not in readme:
            errors.append(f"README.md: no link to docs/{doc.name}")
    seeds = ROOT / "docs" / "seeds.md"
    for n, line in enumerate(seeds.read_text().splitlines(), 1):
        for cited in CITED.findall(line):
            if cited.startswith(CRATES) and not (ROOT / cited).exists():
                errors.append(f"docs/seeds.md:{n}: cites {cited}, which does not exist")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
