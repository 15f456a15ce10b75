#!/usr/bin/env bash
# The peer benchmark: `emend evolve` against three peers on the same field
# space, search part and held-out part -- Optuna's TPE sampler, random search
# (Optuna's RandomSampler) and SMAC3 (random forest) -- see bench/optuna/peer.py.
#
# Installs Optuna, SMAC3 and PyYAML (bench/optuna/requirements.txt; all from
# PyPI as wheels or pure-Python builds: no C compiler, no swig, no apt
# packages) into a virtual environment under target/bench-optuna/venv
# (nothing is installed globally), builds target/release/emend unless EMEND
# names a binary, and passes every argument on to peer.py, e.g.
#
#   scripts/bench-optuna.sh --peer-budget 90 --peers tpe,random,smac --seeds 0,1,2 --ceilings 1000,2000
#
# (the defaults). --peers chooses the peers; --peer-cache DIR records each peer
# run and reads it back when its inputs are identical (--peers-only records
# the peers without emend's side); --tpe-budget, --tpe-cache and --tpe-only
# are the older names of --peer-budget, --peer-cache and --peers-only.
# SMAC3 takes 70-100 s of its own a run besides the evaluations.
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
    echo "== cargo build --release -p emend --features minilm (dense_kind: minilm when EMEND_MINILM_DIR is set)" >&2
    cargo build --release -p emend --features minilm --quiet
    emend=$root/target/release/emend
fi

exec "$venv/bin/python" "$root/bench/optuna/peer.py" --emend "$emend" "$@"
