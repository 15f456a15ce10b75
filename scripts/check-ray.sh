#!/usr/bin/env bash
# The Ray executor against the local one, end to end: installs Ray with pip
# (wheels cached in $EMEND_CI_CACHE/pip, so a second run downloads nothing),
# starts a local head node, evolves the Python reference adapter
# (examples/python-bm25) for one round on the built-in task set twice (with
# emend's defaults, the search proposer screening dozens of strategies), once
# with local shards and once with every shard a Ray task through one driver
# for the run, and requires the
# same outcomes, verdicts and journal events (timestamps and the hash chain
# over them aside). Then runs the Ray tests of engine/tests/shards.rs (a
# worker killed mid-shard is retried; the built-in pipeline on Ray). The
# driver's own unit tests (examples/ray/test_emend_ray.py) run first.
#
# Usage: EMEND=target/release/emend scripts/check-ray.sh
# Fails loudly when Ray cannot be installed or the head node cannot start.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
EMEND="${EMEND:-$ROOT/target/release/emend}"
PY="${PYTHON:-python3}"
RAY_VERSION="2.60.0"
PORT="${EMEND_RAY_PORT:-6399}"
CACHE="${EMEND_CI_CACHE:-$ROOT/target/ci-cache}/pip"

fail() { echo "check-ray: FAILED: $*" >&2; exit 1; }

[ -x "$EMEND" ] || fail "$EMEND is not built (cargo build --release -p emend)"

echo "== Ray $RAY_VERSION (pip; wheels cached in $CACHE)"
mkdir -p "$CACHE"
# setuptools and wheel build the driver package (examples/ray) offline from the cache.
"$PY" -m pip download --quiet --dest "$CACHE" "ray[default]==$RAY_VERSION" setuptools wheel \
    || fail "cannot download ray[default]==$RAY_VERSION from PyPI"
"$PY" -m pip install --quiet --no-index --find-links "$CACHE" "ray[default]==$RAY_VERSION" \
    || fail "cannot install ray[default]==$RAY_VERSION"
# The driver, installed the documented way (its only dependency, Ray, is in place).
"$PY" -m pip install --quiet --no-index --find-links "$CACHE" --no-deps "$ROOT/examples/ray" \
    || fail "cannot install examples/ray (the emend_ray driver)"
"$PY" -c "import ray, emend_ray; print('ray', ray.__version__)"
echo "== the driver's own tests (no cluster needed)"
PYTHONDONTWRITEBYTECODE=1 "$PY" -m unittest discover examples/ray || fail "the driver's tests failed"
RAY_BIN="$(dirname "$(command -v "$PY")")/ray"
[ -x "$RAY_BIN" ] || RAY_BIN="$(command -v ray)" || fail "the ray command is not on PATH"

WORK="$(mktemp -d)"
cleanup() {
    "$RAY_BIN" stop --force >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "== local head node on port $PORT"
"$RAY_BIN" start --head --port="$PORT" --num-cpus=2 --disable-usage-stats >"$WORK/ray-start.log" 2>&1 \
    || { cat "$WORK/ray-start.log" >&2; fail "ray start --head did not start"; }
export RAY_ADDRESS="127.0.0.1:$PORT"
"$PY" -m emend_ray check || fail "cannot reach the head node at $RAY_ADDRESS"

# Two projects, identical but for harness.executor.
ADAPTER="$ROOT/examples/python-bm25"
for name in local ray; do
    "$EMEND" init "$WORK/$name" --tasks builtin --schema "$ADAPTER/strategy.schema.json" \
        --strategy "$ADAPTER/default.yaml" \
        --harness-command python3 "$ADAPTER/adapter.py" {strategy} {tasks} {out} >/dev/null
    sed -i 's/^    shards: 1$/    shards: 3/; s/^    concurrency: 1$/    concurrency: 2/' "$WORK/$name/emend.yaml"
done
sed -i 's/^  kind: command$/  kind: command\n  executor: ray/' "$WORK/ray/emend.yaml"
grep -q '^  executor: ray$' "$WORK/ray/emend.yaml" || fail "could not set harness.executor: ray"

for name in local ray; do
    echo "== emend evolve --rounds 1 ($name executor)"
    start=$(date +%s)
    "$EMEND" --project "$WORK/$name" evolve --rounds 1 >"$WORK/$name.evolve.txt" 2>"$WORK/$name.evolve.err" \
        || { cat "$WORK/$name.evolve.err" >&2; fail "evolve with the $name executor failed"; }
    echo "   $(tail -n 3 "$WORK/$name.evolve.txt" | head -n 1) ($(( $(date +%s) - start )) s)"
    "$EMEND" --project "$WORK/$name" journal export --out "$WORK/$name.events.jsonl"
    "$EMEND" --project "$WORK/$name" log --json >"$WORK/$name.log.json"
    "$EMEND" --project "$WORK/$name" journal verify >/dev/null || fail "the $name journal does not verify"
done

echo "== compare outcomes, verdicts and journal events"
"$PY" - "$WORK/local.events.jsonl" "$WORK/ray.events.jsonl" "$WORK/local.log.json" "$WORK/ray.log.json" <<'EOF'
import json, sys

def unclocked(v):
    """Without a search trial's wall clock (`started`, `duration_ms`), at any depth."""
    if isinstance(v, dict):
        return {k: unclocked(x) for k, x in v.items() if k not in ("started", "duration_ms")}
    if isinstance(v, list):
        return [unclocked(x) for x in v]
    return v

def events(path):
    out = []
    for line in open(path):
        e = json.loads(line)
        # The chain hashes cover the timestamps; everything else must match.
        e.pop("hash"); e.pop("prev_hash")
        e["payload"].pop("at", None)
        # The export's own record times (`at`, `at_source`) differ likewise,
        # and so does each search trial's wall clock.
        e.pop("at", None); e.pop("at_source", None)
        out.append(unclocked(e))
    return out

a, b = events(sys.argv[1]), events(sys.argv[2])
if len(a) != len(b):
    sys.exit(f"check-ray: FAILED: {len(a)} events with the local executor, {len(b)} with Ray")
kinds = {}
for x, y in zip(a, b):
    if x != y:
        sys.exit(f"check-ray: FAILED: event {x['seq']} ({x['kind']}) differs:\nlocal {json.dumps(x)[:2000]}\nray   {json.dumps(y)[:2000]}")
    kinds[x["kind"]] = kinds.get(x["kind"], 0) + 1
outcomes = sum(len(e["payload"].get("questions", [])) for e in a if e["kind"] == "evaluated")
verdicts = sum(1 for e in a if e["kind"] == "candidate_judged")
if outcomes == 0 or verdicts == 0:
    sys.exit(f"check-ray: FAILED: nothing to compare ({outcomes} outcomes, {verdicts} verdicts)")
la, lb = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "at"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
if strip(la) != strip(lb):
    sys.exit("check-ray: FAILED: emend log --json differs between the executors")
print(f"   identical: {len(a)} events ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}),")
print(f"   {outcomes} question outcomes in evaluated events, {verdicts} candidate verdicts, emend log")
EOF

echo "== Ray tests (a worker killed mid-shard is retried; the built-in pipeline on Ray)"
EMEND_REQUIRE_RAY=1 EMEND_RAY_PYTHON="$PY" cargo test --release -p emend --all-features --test cli shards:: -- --test-threads=1 2>&1 \
    | grep -E "^test |test result" || fail "the Ray tests failed"

echo "check-ray: OK"
