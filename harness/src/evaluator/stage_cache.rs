//! The evaluator's in-memory stage caches: bounded maps from a stage's
//! input key to its output (least recently used first out, one slot per key
//! so concurrent evaluations compute each output once), and the hit and miss
//! counters per stage.

use super::*;

/// Hits and misses of one stage cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageCounter {
    pub hits: u64,
    pub misses: u64,
}

/// Cache counters per stage (per evaluation in [`PipelineEvaluation`], lifetime totals
/// from [`Evaluator::cache_stats`]). Answers are counted only for answerers
/// worth caching (models).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    pub ingest: StageCounter,
    pub index: StageCounter,
    pub retrieve: StageCounter,
    pub answer: StageCounter,
    /// The persistent layer (ingest and index together): a hit there also
    /// counts as a hit of its stage, since the stage did not run.
    pub disk: StageCounter,
}

#[derive(Default)]
pub(super) struct Counters([AtomicU64; 10]);

impl Counters {
    pub(super) fn count(&self, stage: usize, hit: bool) {
        self.0[stage * 2 + usize::from(!hit)].fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn add(&self, other: &CacheStats) {
        for (i, c) in [other.ingest, other.index, other.retrieve, other.answer, other.disk].iter().enumerate() {
            self.0[i * 2].fetch_add(c.hits, Ordering::Relaxed);
            self.0[i * 2 + 1].fetch_add(c.misses, Ordering::Relaxed);
        }
    }
    pub(super) fn snapshot(&self) -> CacheStats {
        let g = |i: usize| StageCounter {
            hits: self.0[i * 2].load(Ordering::Relaxed),
            misses: self.0[i * 2 + 1].load(Ordering::Relaxed),
        };
        CacheStats { ingest: g(0), index: g(1), retrieve: g(2), answer: g(3), disk: g(4) }
    }
}

pub(super) const INGEST: usize = 0;
pub(super) const INDEX: usize = 1;
pub(super) const RETRIEVE: usize = 2;
pub(super) const ANSWER: usize = 3;
pub(super) const DISK: usize = 4;

pub(super) type Key = [u8; 32];

pub(super) fn key(parts: &[&[u8]]) -> Key {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed, so that part boundaries are unambiguous.
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

pub(super) fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON serializes")
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a cache lock leaves the map consistent (entries are inserted whole).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

/// The slots by key with their last use, and the keys by last use (for eviction).
pub(super) struct Slots<V> {
    map: HashMap<Key, (Slot<V>, u64)>,
    by_use: BTreeMap<u64, Key>,
    tick: u64,
}

/// A bounded map from key to a stage's output; the least recently used
/// entries go first. One slot per key, so concurrent evaluations compute each
/// output once.
pub(super) struct StageCache<V> {
    capacity: usize,
    inner: Mutex<Slots<V>>,
}

impl<V> StageCache<V> {
    pub(super) fn new(capacity: usize) -> Self {
        StageCache { capacity, inner: Mutex::new(Slots { map: HashMap::new(), by_use: BTreeMap::new(), tick: 0 }) }
    }

    /// The slot for a key, created when missing, marked as just used.
    pub(super) fn slot(&self, k: Key) -> Slot<V> {
        let mut g = lock(&self.inner);
        let Slots { map, by_use, tick } = &mut *g;
        *tick += 1;
        let now = *tick;
        if let Some((s, used)) = map.get_mut(&k) {
            by_use.remove(used);
            *used = now;
            by_use.insert(now, k);
            return s.clone();
        }
        let s: Slot<V> = Arc::new(Mutex::new(None));
        map.insert(k, (s.clone(), now));
        by_use.insert(now, k);
        while map.len() > self.capacity {
            let Some((_, old)) = by_use.pop_first() else { break };
            map.remove(&old);
        }
        s
    }

    pub(super) fn get_or_try<E>(&self, k: Key, f: impl FnOnce() -> Result<V, E>) -> Result<(Arc<V>, bool), E> {
        let slot = self.slot(k);
        let mut value = lock(&slot);
        if let Some(v) = &*value {
            return Ok((v.clone(), true));
        }
        let v = Arc::new(f()?);
        *value = Some(v.clone());
        Ok((v, false))
    }

    /// The stored output for a key, if any (without computing it).
    pub(super) fn get(&self, k: &Key) -> Option<Arc<V>> {
        let slot = lock(&self.inner).map.get(k).map(|e| e.0.clone())?;
        lock(&slot).clone()
    }

    /// Stores an output computed elsewhere (a batch); keeps one already stored.
    pub(super) fn insert(&self, k: Key, v: V) -> Arc<V> {
        self.get_or_try::<std::convert::Infallible>(k, || Ok(v)).map(|(v, _)| v).unwrap_or_else(|e| match e {})
    }

    pub(super) fn clear(&self) {
        let mut g = lock(&self.inner);
        g.map.clear();
        g.by_use.clear();
    }
}
