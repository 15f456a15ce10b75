#!/usr/bin/env python3
"""Lengths of the Rust functions under a directory, longest first.

usage: scripts/fn-lengths.py [--max N] [--min N] DIR

Prints `file:line name (N lines)` for every function outside test code (a
`#[cfg(test)]` item or a `#[test]` function), counting from the line of `fn`
to the line of the closing brace. A function declared without a body (a trait
method) is not counted; a function nested in another is counted on its own and
inside its parent.

  --min N   print only functions longer than N lines
  --max N   print only functions longer than N lines, and exit 1 if there is one
            (the CI check: "no function in any crate is longer than N lines")

The source is read with a small lexer (comments, string, raw string and char
literals are skipped, so a brace inside them does not count), not a Rust
parser: a macro that defines functions is not seen, a `{` inside a
function's signature (a const generic block) would confuse it, and a file
included as `#[cfg(test)] mod name;` is test code only in its `#[test]`
functions.
"""

import argparse
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def code_of(text):
    """`text` with comments and literals blanked (newlines kept), so that only code is left."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif raw_string_at(text, i):
            start = i
            i += 1 if text[i] == "r" else 2  # r or br
            hashes = 0
            while text[i] == "#":
                hashes, i = hashes + 1, i + 1
            end = text.find('"' + "#" * hashes, i + 1)
            j = n if end < 0 else end + 1 + hashes
            out.append(blank(text[start:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}', '{'); otherwise a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def raw_string_at(text, i):
    if not (text.startswith("r", i) or text.startswith("br", i)):
        return False
    if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        return False  # an identifier ending in r (`for`, `iter`)
    j = i + (1 if text[i] == "r" else 2)
    while j < len(text) and text[j] == "#":
        j += 1
    return j < len(text) and text[j] == '"'


def blank(s):
    return "".join("\n" if ch == "\n" else " " for ch in s)


def body_end(code, i):
    """From `i`, the index of the `{` opening the item's body and of its matching `}`;
    None when a `;` at bracket depth 0 comes first (a declaration without a body)."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return None
        elif c == "{" and depth == 0:
            open_at, braces = i, 0
            while i < n:
                if code[i] == "{":
                    braces += 1
                elif code[i] == "}":
                    braces -= 1
                    if braces == 0:
                        return open_at, i
                i += 1
            return None
        i += 1
    return None


def test_ranges(code):
    """Index ranges of items marked `#[cfg(test)]` or `#[test]`."""
    ranges = []
    for m in re.finditer(r"#\[\s*(cfg\(\s*test\s*\)|test)\s*\]", code):
        found = body_end(code, m.end())
        if found:
            ranges.append((m.start(), found[1]))
    return ranges


def functions(path):
    text = open(path, encoding="utf-8").read()
    code = code_of(text)
    tests = test_ranges(code)
    line_at = lambda i: code.count("\n", 0, i) + 1  # noqa: E731
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        if any(a <= m.start() <= b for a, b in tests):
            continue
        found = body_end(code, m.end())
        if not found:
            continue
        first, last = line_at(m.start()), line_at(found[1])
        yield first, m.group(1), last - first + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="a directory of Rust sources (searched recursively)")
    parser.add_argument("--max", type=int, help="exit 1 if a function is longer than this")
    parser.add_argument("--min", type=int, default=0, help="print only functions longer than this")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        parser.error(f"{args.dir}: no such directory")
    limit = args.max if args.max is not None else args.min
    found = []
    for root, dirs, files in os.walk(args.dir):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                found.extend((n, path, line, fn) for line, fn, n in functions(path) if n > limit)
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    for n, path, line, fn in found:
        print(f"{path}:{line} {fn} ({n} lines)")
    if args.max is not None and found:
        print(f"{len(found)} functions are longer than {args.max} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
