//! [`MiniLm`] in a binary built without the `minilm` feature: it never loads,
//! so no value of it exists and its methods are never reached.

use std::convert::Infallible;
use std::path::Path;

use super::{EmbedError, ModelError, NOT_BUILT, bad};
use crate::cache::DiskCache;

/// A sentence embedder this binary cannot load (see [`NOT_BUILT`]).
#[derive(Debug)]
pub struct MiniLm {
    never: Infallible,
}

impl MiniLm {
    /// Always refuses, naming the directory and how to build the support in.
    pub fn load(dir: &Path) -> Result<MiniLm, ModelError> {
        Err(bad(dir, NOT_BUILT))
    }

    pub fn with_cache(self, _cache: DiskCache) -> MiniLm {
        match self.never {}
    }

    pub fn hash(&self) -> &str {
        match self.never {}
    }

    pub fn id(&self) -> String {
        match self.never {}
    }

    pub fn dim(&self) -> usize {
        match self.never {}
    }

    pub fn dir(&self) -> &Path {
        match self.never {}
    }

    pub fn cache_dir(&self) -> Option<&Path> {
        match self.never {}
    }

    pub fn computed(&self) -> u64 {
        match self.never {}
    }

    pub fn sweep(&self) {
        match self.never {}
    }

    pub fn token_ids(&self, _text: &str) -> Result<Vec<u32>, EmbedError> {
        match self.never {}
    }

    pub fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.never {}
    }
}
