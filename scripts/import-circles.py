#!/usr/bin/env python3
"""Import circles in Rust crates: fails when modules import each other in a loop.

The rule it checks: at every level of a crate's module tree, the sibling
modules (each taken with everything below it) import each other without a
circle. A module's own file may use its children and a child may use its
parent (`super::`): that is containment, not a layer. What counts as an
import: every path the code names through `use` or inline (`crate::a::b`,
`super::x`, `self::x`, or a child module's name), outside `#[cfg(test)]`
modules and comments.

    python3 scripts/import-circles.py engine/src harness/src ...
    python3 scripts/import-circles.py --edges engine/src   # print the module graph too

Exit 0 when no circle is found, 1 with every circle and the names that tie it.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith('r#"', i) or text.startswith('r"', i):
            hashes = 1 if text[i + 1] == "#" else 0
            end = '"' + "#" * hashes
            j = text.find(end, i + 2 + hashes)
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif text[i] == "'" and re.match(r"'(\\.|[^\\'])'", text[i : i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i : i + 4])
            i += len(m.group(0))
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def strip_test_modules(text):
    """Drops `#[cfg(test)] mod name { ... }` blocks (brace-matched)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        if not m:
            return text
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        text = text[: m.start()] + text[j + 1 :]


def module_files(src):
    """Maps each module path (tuple) of the crate rooted at src to its file."""
    src = Path(src)
    root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
    files = {}

    def visit(path, file):
        files[path] = file
        text = strip_test_modules(strip_comments_and_strings(file.read_text()))
        here = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.with_suffix("")
        for m in re.finditer(r"(#\[path\s*=\s*\"\"\]\s*)?(pub(\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text):
            name = m.group(4)
            attr = re.search(r'#\[path\s*=\s*"([^"]+)"\]\s*(pub(\([^)]*\))?\s+)?mod\s+' + name + r"\s*;", file.read_text())
            if attr:
                child = file.parent / attr.group(1)
            elif (here / f"{name}.rs").exists():
                child = here / f"{name}.rs"
            else:
                child = here / name / "mod.rs"
            if child.exists():
                visit(path + (name,), child)

    visit((), root)
    return files


def use_paths(tree):
    """Expands a use tree (`a::{b, c::{d as e}}`) into its paths."""
    tree = re.sub(r"\s+as\s+", " as ", " ".join(tree.split()))
    tree = re.sub(r"\s*(::|,|\{|\})\s*", r"\1", tree)
    depth, start, parts = 0, 0, []
    for i, c in enumerate(tree):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(tree[start:i])
            start = i + 1
    parts.append(tree[start:])
    paths = []
    for part in filter(None, parts):
        if "{" in part:
            head, inner = part.split("{", 1)
            for sub in use_paths(inner[: inner.rfind("}")]):
                paths.append(head + sub)
        else:
            paths.append(part.split(" as ")[0].strip())
    return paths


def references(path, text, children):
    """The absolute module paths (tuples of segments) one file names."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        for p in use_paths(m.group(1)):
            found.append(p.lstrip(":").split("::"))
    for m in re.finditer(r"\b(crate|super|self|" + "|".join(children or ["\0"]) + r")((?:::" + IDENT + r")+)", text):
        found.append([m.group(1)] + m.group(2).split("::")[1:])
    out = []
    for segs in found:
        if segs[0] == "crate":
            out.append(tuple(segs[1:]))
        elif segs[0] in ("super", "self"):
            base = list(path)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super" and base:
                    base.pop()
                segs = segs[1:]
            out.append(tuple(base + segs))
        elif segs[0] in children:
            out.append(tuple(path) + tuple(segs))
    return out


def resolve(ref, modules):
    """The longest module path that prefixes ref, and the name after it."""
    for k in range(len(ref), 0, -1):
        if ref[:k] in modules:
            return ref[:k], (ref[k] if k < len(ref) else ref[k - 1])
    return None, None


def edges_of(src):
    files = module_files(src)
    modules = set(files)
    edges = defaultdict(set)  # (from_module, to_module) -> names
    for path, file in files.items():
        text = strip_test_modules(strip_comments_and_strings(file.read_text()))
        children = [m[-1] for m in modules if len(m) == len(path) + 1 and m[: len(path)] == path]
        for ref in references(path, text, children):
            target, name = resolve(ref, modules)
            if target is not None and target != path:
                edges[(path, target)].add(name)
    return files, edges


def circles(files, edges):
    """Circles among siblings, at every level of the module tree."""
    found = []
    for parent in sorted(files):
        kids = sorted(m for m in files if len(m) == len(parent) + 1 and m[: len(parent)] == parent)
        graph, why = defaultdict(set), defaultdict(set)
        for (a, b), names in edges.items():
            if len(a) > len(parent) and len(b) > len(parent) and a[: len(parent)] == parent == b[: len(parent)]:
                x, y = a[: len(parent) + 1], b[: len(parent) + 1]
                if x != y:
                    graph[x].add(y)
                    why[(x, y)].add((a, b, tuple(sorted(names))))
        for comp in tarjan(kids, graph):
            if len(comp) > 1:
                found.append((parent, comp, why))
    return found


def tarjan(nodes, graph):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return comps


def name(path):
    return "::".join(path) or "crate"


def main(argv):
    show_edges = "--edges" in argv
    roots = [a for a in argv if not a.startswith("--")]
    if not roots:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: import-circles.py [--edges] SRC_DIR...", file=sys.stderr)
        return 2
    sys.setrecursionlimit(10000)
    bad = 0
    for src in roots:
        files, edges = edges_of(src)
        if show_edges:
            for (a, b), names in sorted(edges.items()):
                print(f"{src}: {name(a)} -> {name(b)}: {', '.join(sorted(names))}")
        for parent, comp, why in circles(files, edges):
            bad += 1
            print(f"{src}: circle under {name(parent)}: {', '.join(name(c) for c in comp)}")
            members = set(comp)
            for (x, y), ties in sorted(why.items()):
                if x in members and y in members:
                    for a, b, names in sorted(ties):
                        print(f"    {name(a)} -> {name(b)}: {', '.join(names)}")
        print(f"{src}: {len(files)} modules, {len(edges)} imports between modules")
    if bad:
        print(f"{bad} import circle(s): move the shared names to the lowest module that needs them", file=sys.stderr)
        return 1
    print("no import circle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
