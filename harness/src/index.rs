//! Stage 2, index: a BM25 index and a dense channel over one conversation's
//! memory items.
//!
//! Reads `index.*`. BM25 (Lucene's idf, `ln(1 + (N - df + 0.5) / (df + 0.5))`)
//! runs over [`crate::text::terms`]. The dense channel (`dense_kind`) is one of:
//! `trigram`, which embeds text as hashed, signed character-trigram counts in
//! `dense_dim` buckets, L2-normalized, so that word forms sharing stems
//! (`painting` / `paint`) meet where BM25's exact terms do not; `minilm`, the
//! sentence embeddings of [`crate::minilm`] (the question is embedded by the
//! same model, by the caller); or none. Both score by cosine.

use std::collections::HashMap;

use crate::cache::{Dec, Enc};
use crate::ingest::Memory;
use crate::minilm::{EmbedError, MiniLm};
use crate::strategy::{DenseKind, Index as IndexSpec};
use crate::text::{FnvBuild, for_each_term, for_each_trigram};

/// BM25 over the items' terms.
#[derive(Debug, Clone)]
pub struct Bm25 {
    k1: f64,
    b: f64,
    avgdl: f64,
    vocab: HashMap<String, u32, FnvBuild>,
    /// Per term id: (item, term frequency), ascending by item.
    postings: Vec<Vec<(u32, u32)>>,
    idf: Vec<f64>,
    doc_len: Vec<u32>,
    /// Per item: (term id, tf), ascending by term id; for expansion and reranking.
    doc_terms: Vec<Vec<(u32, u32)>>,
    terms: Vec<String>,
}

impl Bm25 {
    pub fn build(texts: &[&str], k1: f64, b: f64) -> Bm25 {
        let mut vocab: HashMap<String, u32, FnvBuild> = HashMap::default();
        let mut names: Vec<String> = Vec::new();
        let mut postings: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut doc_len = Vec::with_capacity(texts.len());
        let mut doc_terms = Vec::with_capacity(texts.len());
        for (d, text) in texts.iter().enumerate() {
            let mut ids: Vec<u32> = Vec::new();
            for_each_term(text, |t| {
                let id = match vocab.get(t) {
                    Some(&id) => id,
                    None => {
                        names.push(t.to_string());
                        vocab.insert(t.to_string(), names.len() as u32 - 1);
                        names.len() as u32 - 1
                    }
                };
                ids.push(id);
            });
            doc_len.push(ids.len() as u32);
            ids.sort_unstable();
            let mut counts: Vec<(u32, u32)> = Vec::new();
            for id in ids {
                match counts.last_mut() {
                    Some((x, c)) if *x == id => *c += 1,
                    _ => counts.push((id, 1)),
                }
            }
            postings.resize(names.len(), Vec::new());
            for &(t, c) in &counts {
                postings[t as usize].push((d as u32, c));
            }
            doc_terms.push(counts);
        }
        let n = texts.len() as f64;
        let idf = postings.iter().map(|p| (1.0 + (n - p.len() as f64 + 0.5) / (p.len() as f64 + 0.5)).ln()).collect();
        let avgdl = if texts.is_empty() { 1.0 } else { doc_len.iter().map(|&l| f64::from(l)).sum::<f64>() / n };
        Bm25 { k1, b, avgdl: avgdl.max(1e-9), vocab, postings, idf, doc_len, doc_terms, terms: names }
    }

    /// Term ids of the known terms of `text`, first occurrence order, no repeats.
    pub fn query_ids(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for_each_term(text, |t| {
            if let Some(&id) = self.vocab.get(t)
                && !out.contains(&id)
            {
                out.push(id);
            }
        });
        out
    }

    pub fn term(&self, id: u32) -> &str {
        &self.terms[id as usize]
    }

    pub fn idf(&self, id: u32) -> f64 {
        self.idf[id as usize]
    }

    pub fn doc_terms(&self, item: u32) -> &[(u32, u32)] {
        &self.doc_terms[item as usize]
    }

    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// BM25 score of every item for a query of distinct term ids.
    pub fn scores(&self, query: &[u32]) -> Vec<f64> {
        let mut s = vec![0.0; self.doc_len.len()];
        for &t in query {
            let idf = self.idf[t as usize];
            for &(d, tf) in &self.postings[t as usize] {
                let tf = f64::from(tf);
                let norm = 1.0 - self.b + self.b * f64::from(self.doc_len[d as usize]) / self.avgdl;
                s[d as usize] += idf * tf * (self.k1 + 1.0) / (tf + self.k1 * norm);
            }
        }
        s
    }
}

/// Unit vectors, one row per item: hashed character trigrams with the
/// buckets' idf weights (so that trigrams found in every item, speaker names,
/// count little), or a model's embeddings (no weights: `idf` is empty).
#[derive(Debug, Clone)]
pub struct Dense {
    dim: usize,
    idf: Vec<f32>,
    rows: Vec<f32>,
}

impl Dense {
    pub fn build(texts: &[&str], dim: usize) -> Dense {
        let raw: Vec<Vec<f32>> = texts.iter().map(|t| hashed_counts(t, dim)).collect();
        let mut df = vec![0u32; dim];
        for r in &raw {
            for (d, x) in df.iter_mut().zip(r) {
                *d += u32::from(*x != 0.0);
            }
        }
        let n = texts.len() as f32;
        let idf: Vec<f32> = df.iter().map(|&d| ((n + 1.0) / (d as f32 + 1.0)).ln() + 1.0).collect();
        Dense::weighted(raw, dim, idf)
    }

    /// The hashed counts `raw` weighted by `idf`, each row of unit length.
    fn weighted(raw: Vec<Vec<f32>>, dim: usize, idf: Vec<f32>) -> Dense {
        let mut rows = Vec::with_capacity(raw.len() * dim);
        for r in raw {
            rows.extend(weighted_unit(r, &idf));
        }
        Dense { dim, idf, rows }
    }

    /// The trigram channel without its bucket weights (every bucket weighs 1):
    /// [`embed`] of each item, queried by [`Dense::scores`] as plain cosine.
    /// Not a strategy's channel (those are built by [`Dense::build`]); the
    /// collision protocol's `--hash-idf off` measures what the weights do.
    pub fn build_unweighted(texts: &[&str], dim: usize) -> Dense {
        Dense::weighted(texts.iter().map(|t| hashed_counts(t, dim)).collect(), dim, vec![1.0; dim])
    }

    /// A model's unit embeddings of the items (all of dimension `dim`).
    pub fn from_embeddings(embeddings: Vec<Vec<f32>>, dim: usize) -> Dense {
        let rows: Vec<f32> = embeddings.into_iter().flatten().collect();
        assert_eq!(rows.len() % dim.max(1), 0, "embeddings of one dimension");
        Dense { dim, idf: Vec::new(), rows }
    }

    /// Whether the rows are a model's embeddings (queried by [`Dense::scores_embedded`]).
    pub fn is_model(&self) -> bool {
        self.idf.is_empty()
    }

    /// Cosine of the query with every item (the trigram channel).
    pub fn scores(&self, query: &str) -> Vec<f64> {
        assert!(!self.is_model(), "a model's index is queried with the question's embedding");
        let q = weighted_unit(hashed_counts(query, self.dim), &self.idf);
        self.scores_embedded(&q)
    }

    /// Cosine of a unit query vector with every item.
    pub fn scores_embedded(&self, q: &[f32]) -> Vec<f64> {
        assert_eq!(q.len(), self.dim, "a query of the index's dimension");
        let mut out = vec![0f32; self.rows.len() / self.dim.max(1)];
        dots(&self.rows, q, &mut out);
        out.into_iter().map(f64::from).collect()
    }
}

/// `out[i]` = the dot product of row `i` of `rows` (rows of `q.len()`) with `q`.
///
/// On x86-64 CPUs with AVX (runtime detection) the eight lanes are one
/// 256-bit register instead of two SSE ones. The arithmetic is unchanged:
/// per lane the same multiplies and adds in the same order, no fused
/// multiply-add (it rounds once instead of twice), the same final sum; so the
/// results are the portable path's bit for bit (tested), and outcomes do not
/// depend on the CPU.
fn dots(rows: &[f32], q: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX (checked just above).
        unsafe { dots_avx(rows, q, out) };
        return;
    }
    dots_portable(rows, q, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn dots_avx(rows: &[f32], q: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    let dim = q.len();
    if dim == 0 {
        return;
    }
    let body = dim / 8 * 8;
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(dim)) {
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < body {
            // SAFETY: i + 8 <= body <= dim = r.len() = q.len(); unaligned loads.
            let (x, y) = unsafe { (_mm256_loadu_ps(r.as_ptr().add(i)), _mm256_loadu_ps(q.as_ptr().add(i))) };
            // Lane k accumulates elements k, k + 8, ...: the portable lanes, in the same order.
            acc = _mm256_add_ps(acc, _mm256_mul_ps(x, y));
            i += 8;
        }
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds eight f32.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        let mut s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        for (x, y) in r[body..].iter().zip(&q[body..]) {
            s += x * y;
        }
        *o = s;
    }
}

#[inline(always)]
fn dots_portable(rows: &[f32], q: &[f32], out: &mut [f32]) {
    if q.is_empty() {
        return;
    }
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
        *o = dot(r, q);
    }
}

/// Dot product in eight fixed lanes (vectorizes; the summation order is fixed,
/// so results are identical on every run).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let mut s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Signed hashed trigram counts: each trigram hash adds +1 or -1 (its top
/// bit) to bucket `hash % dim`.
pub fn hashed_counts(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    for_each_trigram(text, |h| {
        let bucket = (h % dim as u64) as usize;
        v[bucket] += if h >> 63 == 1 { -1.0 } else { 1.0 };
    });
    v
}

/// Multiplies by the bucket weights and scales to unit length (all zero stays zero).
fn weighted_unit(mut v: Vec<f32>, idf: &[f32]) -> Vec<f32> {
    for (x, w) in v.iter_mut().zip(idf) {
        *x *= w;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// The dense embedding without corpus weights: [`hashed_counts`], L2-normalized.
pub fn embed(text: &str, dim: usize) -> Vec<f32> {
    weighted_unit(hashed_counts(text, dim), &vec![1.0; dim])
}

/// The index of one conversation's memory.
#[derive(Debug, Clone)]
pub struct Index {
    pub bm25: Bm25,
    /// None when `dense_kind: none`.
    pub dense: Option<Dense>,
}

impl Index {
    /// The persistent stage cache's encoding (see [`crate::cache`]). The
    /// vocabulary and the postings are rebuilt from the terms and the
    /// per-item term lists, in the order [`Bm25::build`] made them.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let b = &self.bm25;
        let mut e = Enc::default();
        e.f64(b.k1);
        e.f64(b.b);
        e.f64(b.avgdl);
        e.u64(b.terms.len() as u64);
        for t in &b.terms {
            e.str(t);
        }
        e.f64s(&b.idf);
        e.u32s(&b.doc_len);
        e.u64(b.doc_terms.len() as u64);
        for d in &b.doc_terms {
            e.pairs(d);
        }
        match &self.dense {
            Some(d) => {
                e.u64(d.dim as u64 + 1);
                // Empty for a model's embeddings.
                e.f32s(&d.idf);
                // Rows are sparse (a text has few of the buckets): (bucket, bits)
                // of the entries whose bits are not +0.0, so -0.0 survives too.
                e.u64((d.rows.len() / d.dim.max(1)) as u64);
                let mut nz: Vec<(u32, u32)> = Vec::new();
                for row in d.rows.chunks_exact(d.dim.max(1)) {
                    nz.clear();
                    nz.extend(
                        row.iter().enumerate().filter(|(_, x)| x.to_bits() != 0).map(|(i, x)| (i as u32, x.to_bits())),
                    );
                    e.pairs(&nz);
                }
            }
            None => e.u64(0),
        }
        e.0
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Index> {
        let mut d = Dec(bytes);
        let (k1, b, avgdl) = (d.f64()?, d.f64()?, d.f64()?);
        let nt = usize::try_from(d.u64()?).ok()?.min(bytes.len());
        let mut terms = Vec::with_capacity(nt);
        for _ in 0..nt {
            terms.push(d.str()?);
        }
        let idf = d.f64s()?;
        let doc_len = d.u32s()?;
        let nd = usize::try_from(d.u64()?).ok()?.min(bytes.len());
        let mut doc_terms = Vec::with_capacity(nd);
        for _ in 0..nd {
            doc_terms.push(d.pairs()?);
        }
        let dense = match usize::try_from(d.u64()?).ok()? {
            0 => None,
            dim1 => {
                let dim = dim1 - 1;
                let idf = d.f32s()?;
                if !idf.is_empty() && idf.len() != dim {
                    return None;
                }
                let n = usize::try_from(d.u64()?).ok()?;
                let mut rows = vec![0f32; n.checked_mul(dim)?.min(bytes.len().saturating_mul(dim))];
                if rows.len() != n * dim {
                    return None;
                }
                for r in 0..n {
                    for (i, bits) in d.pairs()? {
                        let i = i as usize;
                        if i >= dim {
                            return None;
                        }
                        rows[r * dim + i] = f32::from_bits(bits);
                    }
                }
                Some(Dense { dim, idf, rows })
            }
        };
        if !d.done() || idf.len() != terms.len() || doc_len.len() != doc_terms.len() {
            return None;
        }
        let vocab: HashMap<String, u32, FnvBuild> =
            terms.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let mut postings: Vec<Vec<(u32, u32)>> = vec![Vec::new(); terms.len()];
        for (doc, dt) in doc_terms.iter().enumerate() {
            for &(t, c) in dt {
                postings.get_mut(t as usize)?.push((doc as u32, c));
            }
        }
        let bm25 = Bm25 { k1, b, avgdl, vocab, postings, idf, doc_len, doc_terms, terms };
        Some(Index { bm25, dense })
    }
}

/// Runs the index stage; `minilm` is the embedder for `dense_kind: minilm`
/// (the caller checks that it is there).
pub fn build(memory: &Memory, spec: &IndexSpec, minilm: Option<&MiniLm>) -> Result<Index, EmbedError> {
    build_with(memory, spec, minilm, true)
}

/// [`build`], with the trigram channel's bucket idf weights (`hash_idf`
/// true, every strategy's channel) or without them ([`Dense::build_unweighted`]).
pub fn build_with(
    memory: &Memory,
    spec: &IndexSpec,
    minilm: Option<&MiniLm>,
    hash_idf: bool,
) -> Result<Index, EmbedError> {
    let texts: Vec<&str> = memory.items.iter().map(|i| i.text.as_str()).collect();
    // The two channels are independent: built side by side, so that a
    // conversation's index keeps both cores busy when conversations are few.
    let (bm25, dense) = rayon::join(
        || Bm25::build(&texts, spec.bm25_k1, spec.bm25_b),
        || match spec.dense_kind {
            DenseKind::Trigram if hash_idf => Ok(Some(Dense::build(&texts, spec.dense_dim.max(1) as usize))),
            DenseKind::Trigram => Ok(Some(Dense::build_unweighted(&texts, spec.dense_dim.max(1) as usize))),
            DenseKind::Minilm => {
                let m = minilm.expect("dense_kind: minilm is checked to have its model");
                Ok(Some(Dense::from_embeddings(m.embed(&texts)?, m.dim())))
            }
            DenseKind::None => Ok(None),
        },
    );
    Ok(Index { bm25, dense: dense? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_prefers_rare_terms_and_short_items() {
        let docs = ["the cat sat on the mat", "a dog and a cat", "dog dog dog running far away today"];
        let ix = Bm25::build(&docs, 1.2, 0.75);
        let q = ix.query_ids("Dog? unknown dog");
        assert_eq!(q.len(), 1);
        let s = ix.scores(&q);
        assert_eq!(s[0], 0.0);
        assert!(s[1] > 0.0 && s[2] > 0.0);
        let binary = Bm25::build(&docs, 0.0, 0.75).scores(&q);
        assert!((binary[1] - binary[2]).abs() < 1e-12, "k1 = 0 ignores term frequency");
    }

    #[test]
    fn the_simd_dot_products_are_the_portable_ones_bit_for_bit() {
        // Dimensions with and without a remainder past the eight lanes.
        for dim in [1usize, 7, 8, 100, 256, 333] {
            let mut x = 0x9e3779b97f4a7c15u64 ^ dim as u64;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            };
            let rows: Vec<f32> = (0..dim * 37).map(|_| next()).collect();
            let q: Vec<f32> = (0..dim).map(|_| next()).collect();
            let mut fast = vec![0f32; 37];
            let mut slow = vec![0f32; 37];
            dots(&rows, &q, &mut fast);
            dots_portable(&rows, &q, &mut slow);
            assert_eq!(
                fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "dim {dim}"
            );
        }
    }

    #[test]
    fn dense_vectors_are_unit_length_and_match_word_forms() {
        let v = embed("painting sunsets", 256);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(embed("", 64).iter().all(|x| *x == 0.0));
        let d = Dense::build(&["I have been painting sunsets", "we went swimming yesterday"], 512);
        let s = d.scores("paint a sunset");
        assert!(s[0] > s[1] + 0.1, "{s:?}");
        // Unweighted: plain cosine of the two `embed`s.
        let u = Dense::build_unweighted(&["I have been painting sunsets", "we went swimming yesterday"], 512);
        let (q, m) = (embed("paint a sunset", 512), embed("I have been painting sunsets", 512));
        let cos: f32 = q.iter().zip(&m).map(|(a, b)| a * b).sum();
        assert!((u.scores("paint a sunset")[0] - f64::from(cos)).abs() < 1e-6);
        assert!(!u.is_model());
    }
}
