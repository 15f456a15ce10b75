#!/usr/bin/env bash
# Checks that `emend report` renders in a real browser: builds a report from a
# fresh 10-round run on the embedded dataset (plus a rollback and a
# restore-best, so every kind of chart marker is drawn), renders it with
# headless Chromium, and checks that the screenshot shows a chart (not a blank
# page) and that the rendered DOM holds the charts' SVG: the trajectory, and the
# accuracy-cost chart with its front and the served version ringed on it.
#
# Installs Debian's chromium when it is missing (needs root or sudo and the
# Debian mirror). Leaves report.html, report.png and dom.html in
# $REPORT_CHECK_OUT (default target/report-check) for a person to look at.
#
# Environment: EMEND (the binary; default: build target/release/emend),
# CHROMIUM (the browser; default: chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${REPORT_CHECK_OUT:-$root/target/report-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)

browser=${CHROMIUM:-chromium}
if ! command -v "$browser" >/dev/null 2>&1; then
    echo "== installing chromium (Debian package)"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "error: chromium is missing and this is not root (no sudo)" >&2; exit 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
    browser=chromium
fi
echo "== $("$browser" --version 2>/dev/null || echo "$browser")"

if [ -z "${EMEND:-}" ]; then
    echo "== cargo build --release -p emend"
    cargo build --release -p emend --quiet
    EMEND=$root/target/release/emend
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== a 10-round run on the embedded dataset in $work"
"$EMEND" init "$work/p" --tasks builtin >/dev/null
(
    cd "$work/p"
    "$EMEND" evolve --rounds 10 --quiet >/dev/null
    "$EMEND" rollback --to v1 --reason 'check-report: a rollback with <script>alert(1)</script> in its reason' >/dev/null
    "$EMEND" restore-best >/dev/null
    "$EMEND" journal verify >/dev/null
    "$EMEND" report --out "$out/report.html"
)
echo "== a run under manual approval, until a version waits for approval"
"$EMEND" init "$work/q" --tasks builtin >/dev/null
(
    cd "$work/q"
    sed -i 's/^  approval: auto/  approval: manual/' emend.yaml
    "$EMEND" evolve --rounds 30 --quiet >/dev/null
    # Into a file first: `grep -q` quits at its first match, and under pipefail
    # the SIGPIPE that ends the writer would fail the check at random.
    "$EMEND" pending --json >"$work/pending.json"
    grep -q '"state": "pending"' "$work/pending.json" || { echo "error: no version waits for approval" >&2; exit 1; }
    "$EMEND" report --out "$out/pending.html"
)

echo "== rendering with headless chromium"
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
    --disable-component-update --disable-sync --disable-dev-shm-usage --hide-scrollbars
    --user-data-dir="$work/chromium-profile")
rm -f "$out/report.png"
timeout 180 "$browser" "${flags[@]}" --screenshot="$out/report.png" --window-size=1280,2400 \
    "file://$out/report.html" >"$work/chromium.log" 2>&1 || { cat "$work/chromium.log" >&2; exit 1; }
timeout 180 "$browser" "${flags[@]}" --dump-dom "file://$out/report.html" >"$out/dom.html" 2>"$work/chromium-dom.log" \
    || { cat "$work/chromium-dom.log" >&2; exit 1; }

timeout 180 "$browser" "${flags[@]}" --dump-dom "file://$out/pending.html" >"$out/pending-dom.html" \
    2>"$work/chromium-dom.log" || { cat "$work/chromium-dom.log" >&2; exit 1; }

echo "== checking the rendered DOM"
grep -qF 'class="front-point pending"' "$out/pending-dom.html" \
    || { echo "error: the accuracy-cost chart does not mark the pending version" >&2; exit 1; }
for needle in '<svg id="trajectory-chart"' '<polyline class="served"' 'class="point accepted"' \
    'class="point rollback"' '<table class="funnel">' '<table class="hypotheses">' '<pre class="diff">' \
    '<svg id="front-chart"' '<polyline class="front"' 'class="front-point served"' 'cost: ' \
    '<table class="shift">'; do
    grep -qF "$needle" "$out/dom.html" || { echo "error: the rendered DOM lacks $needle" >&2; exit 1; }
done
if grep -qiE '<script|https?://' "$out/report.html"; then
    echo "error: report.html has a script or a network address" >&2
    exit 1
fi

echo "== checking the screenshot"
python3 - "$out/report.png" <<'PY'
"""Decode the PNG (stdlib only) and check that the chart is drawn: the served
line's blue, the accepted green and the rollback orange appear, spread over a
chart-sized box holding many distinct colours."""
import struct, sys, zlib

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"error: {path} is not a PNG")
pos, idat, width = 8, b"", 0
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        if depth != 8 or ctype not in (2, 6) or interlace:
            sys.exit(f"error: unexpected PNG format (depth {depth}, colour type {ctype}, interlace {interlace})")
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
stride = width * bpp
# The chart sits near the top of the page: decode (and search) the first rows only.
full_height, height = height, min(height, 1400)
rows, prev, i = [], bytearray(stride), 0
for _ in range(height):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
        if f == 1:
            line[x] = (line[x] + a) & 255
        elif f == 2:
            line[x] = (line[x] + b) & 255
        elif f == 3:
            line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line))
    prev = line

def near(px, rgb, tol=40):
    return all(abs(px[k] - rgb[k]) <= tol for k in range(3))

marks = {"served line": (0x2F, 0x6F, 0xB5), "accepted": (0x3A, 0x9D, 0x5D), "rollback": (0xF0, 0xA0, 0x20)}
found = {k: [] for k in marks}
for y in range(0, height):
    row = rows[y]
    for x in range(width):
        px = row[x * bpp:x * bpp + 3]
        for k, rgb in marks.items():
            if near(px, rgb):
                found[k].append((x, y))
for k, pts in found.items():
    if len(pts) < 30:
        sys.exit(f"error: the screenshot shows no {k} (only {len(pts)} pixels of its colour)")
xs = [p[0] for p in found["served line"]]
ys = [p[1] for p in found["served line"]]
x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
if x1 - x0 < 500:
    sys.exit(f"error: the served line spans only {x1 - x0} px across")
colours = set()
for y in range(max(0, y0 - 60), min(height, y1 + 60)):
    row = rows[y]
    for x in range(max(0, x0 - 80), min(width, x1 + 20)):
        colours.add(row[x * bpp:x * bpp + 3])
if len(colours) < 40:
    sys.exit(f"error: the chart area has only {len(colours)} distinct colours: blank?")
print(f"ok: {width}x{full_height} screenshot; served line across x {x0}..{x1}, y {y0}..{y1}; "
      f"{len(colours)} distinct colours in the chart area; "
      + ", ".join(f"{k} {len(v)} px" for k, v in found.items()))
PY
echo "ok: the report renders in headless chromium; see $out/report.png"
