#!/usr/bin/env bash
# Quality at a price, on a task set (default: locomo10-dev.json beside the
# checkout): for each seed, one project searched for accuracy alone and one
# with `cost.per_1k_tokens: PRICE`, each `emend evolve --max-evals 45`; then,
# from the accuracy-only winner, one run with the cheaper step on
# (`cost.noninferiority_margin: MARGIN`). Prints one TSV row per project:
# seed, arm, served version, accuracy and mean context tokens on the whole
# task set, and the utility at PRICE.
#
# usage: scripts/bench-price.sh [--data FILE] [--seeds 0,1,2] [--price 2]
#                               [--margin 0.05] [--max-evals 45] [--emend BIN]
set -euo pipefail

data="$(cd "$(dirname "$0")/../.." && pwd)/shared/data/locomo10-dev.json"
seeds="0,1,2,3,4,5,6,7,8,9"
price=2
margin=0.05
evals=45
emend="$(cd "$(dirname "$0")/.." && pwd)/target/release/emend"
while [ $# -gt 0 ]; do
    case "$1" in
        --data) data="$2"; shift 2 ;;
        --seeds) seeds="$2"; shift 2 ;;
        --price) price="$2"; shift 2 ;;
        --margin) margin="$2"; shift 2 ;;
        --max-evals) evals="$2"; shift 2 ;;
        --emend) emend="$2"; shift 2 ;;
        *) echo "bench-price.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -f "$data" ] || { echo "bench-price.sh: no task set at $data (--data FILE)" >&2; exit 2; }
[ -x "$emend" ] || { echo "bench-price.sh: no emend binary at $emend (cargo build --release, or --emend BIN)" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# seed arm: served version, accuracy, tokens, utility at the price.
row() {
    (cd "$2" && "$emend" status --json) | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = d["served_cost"]["mean_context_tokens"]
a = d["served_accuracy"]
print("\t".join([sys.argv[1], sys.argv[2], "v%d" % d["served_version"], "%.4f" % a, "%.0f" % t,
                 "%.4f" % (a - float(sys.argv[3]) / 100 * t / 1000)]))' "$1" "$3" "$price"
}

printf 'seed\tarm\tserved\taccuracy\ttokens\tutility\n'
for seed in ${seeds//,/ }; do
    base="$work/s$seed"
    "$emend" init "$base/accuracy" --tasks "$data" >/dev/null
    sed -i "s/^  seed: 0$/  seed: $seed/" "$base/accuracy/emend.yaml"
    cp -r "$base/accuracy" "$base/price"
    sed -i "s/^  per_1k_tokens: null$/  per_1k_tokens: $price/" "$base/price/emend.yaml"
    for arm in accuracy price; do
        (cd "$base/$arm" && "$emend" evolve --max-evals "$evals" --quiet >/dev/null 2>&1) || true
        row "$seed" "$base/$arm" "$arm"
    done
    cp -r "$base/accuracy" "$base/cheaper"
    sed -i "s/^  noninferiority_margin: null$/  noninferiority_margin: $margin/" "$base/cheaper/emend.yaml"
    (cd "$base/cheaper" && "$emend" evolve --max-evals "$evals" --quiet >/dev/null 2>&1) || true
    row "$seed" "$base/cheaper" "cheaper"
done
