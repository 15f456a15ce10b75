#!/usr/bin/env bash
# The peer benchmark: `emend evolve` against Optuna's TPE sampler on the same
# field space, search part and held-out part (see bench/optuna/peer.py).
#
# Installs Optuna and PyYAML (bench/optuna/requirements.txt) into a virtual
# environment under target/bench-optuna/venv (nothing is installed globally),
# builds target/release/emend unless EMEND names a binary, and passes every
# argument on to peer.py, e.g.
#
#   scripts/bench-optuna.sh --tpe-budget 90 --seeds 0,1,2 --ceilings 1000,2000
#
# Results: target/bench-optuna/results.md and results.json (or --out DIR).
# Environment: EMEND (the binary), EMEND_LOCOMO (the LoCoMo file; default
# ../shared/data/locomo10-dev.json), PYTHON (the interpreter that creates the
# environment; default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=$root/target/bench-optuna/venv
req=$root/bench/optuna/requirements.txt

if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv" >&2
    "${PYTHON:-python3}" -m venv "$venv"
fi
# Reinstall only when the requirements changed since the last install.
stamp=$venv/.requirements
if ! cmp -s "$req" "$stamp"; then
    echo "== pip install -r bench/optuna/requirements.txt" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
fi

emend=${EMEND:-}
if [ -z "$emend" ]; then
    echo "== cargo build --release -p emend" >&2
    cargo build --release -p emend --quiet
    emend=$root/target/release/emend
fi

exec "$venv/bin/python" "$root/bench/optuna/peer.py" --emend "$emend" "$@"
