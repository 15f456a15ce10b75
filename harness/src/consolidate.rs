//! Maintenance, `ingest.consolidate`: at each replay checkpoint (and at
//! endpoint over the whole history, which is the last checkpoint), an item
//! that is a near-duplicate of a NEWER item of the memory then is retired.
//!
//! Similarity is the one ingest's dedup uses: the cosine of character-trigram
//! count vectors of the item's content (text without speakers or stamp,
//! lowercased). Dedup drops the later of two near-duplicates as it ingests;
//! consolidation, seeing the memory as a whole, keeps the later one: when a
//! fact is retold with a detail changed ("I work at the bakery" -> "I work at
//! the studio"), the newer telling is the valid one.
//!
//! A retired item leaves the memory with its text and its turn ids: it is not
//! merged into the newer item. Merging (the newer item keeping both items'
//! source turns) would make the evidence trace and the evidence judge credit
//! the older turn to a context whose text no longer states it; retiring keeps
//! the provenance honest: a turn no item holds any more shows as lost.
//!
//! Retirement depends only on the items present, so an item retired at a
//! checkpoint stays retired at every later one, and a checkpoint's memory is
//! a pure function of the sessions seen: `consolidate(prefix)`. Items keep
//! their ids; the gaps show what was retired.

use crate::dataset::Sample;
use crate::ingest::{Deduper, Memory, item_content};
use crate::strategy::Ingest;

/// The memory after consolidation: items that are near-duplicates (at or
/// above `spec.consolidate.threshold`) of a newer item are gone, the holders
/// of their turns updated. A memory is returned unchanged when consolidation
/// is off. `sample` is the conversation (or its prefix) `memory` came from.
pub fn consolidate(memory: &Memory, sample: &Sample, spec: &Ingest) -> Memory {
    if spec.consolidate.is_off() {
        return memory.clone();
    }
    let retired = retired_items(memory, sample, spec);
    let mut index = vec![u32::MAX; memory.items.len()];
    let mut items = Vec::with_capacity(memory.items.len());
    for (i, it) in memory.items.iter().enumerate() {
        if !retired[i] {
            index[i] = items.len() as u32;
            items.push(it.clone());
        }
    }
    let holders = memory
        .holders
        .iter()
        .map(|h| h.iter().map(|&i| index[i as usize]).filter(|&i| i != u32::MAX).collect())
        .collect();
    Memory {
        conversation: memory.conversation.clone(),
        holders,
        last_day: memory.last_day,
        stats: memory.stats,
        retired: memory.retired + (memory.items.len() - items.len()) as u32,
        items,
    }
}

/// Per item: is some newer item (later in the memory, which is in
/// conversation order) at or above the threshold? Items are compared newest
/// first against every newer one, retired or not.
fn retired_items(memory: &Memory, sample: &Sample, spec: &Ingest) -> Vec<bool> {
    let mut newer = Deduper::new(spec.consolidate.threshold);
    let mut retired = vec![false; memory.items.len()];
    for (i, it) in memory.items.iter().enumerate().rev() {
        let text = item_content(sample, spec, it);
        let profile = newer.profile(&text);
        retired[i] = newer.is_duplicate(&text, &profile);
        newer.keep(text, &profile);
    }
    retired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::load_str;
    use crate::ingest::ingest;
    use crate::strategy::{Consolidate, IngestUnit};

    fn sample() -> Sample {
        let json = r#"[{"sample_id": "c", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
              {"speaker": "Ann", "dia_id": "D1:1", "text": "I work as a baker at the Alfama bakery in Lisbon."},
              {"speaker": "Bo", "dia_id": "D1:2", "text": "The weather is lovely in spring."}],
            "session_2_date_time": "1:00 pm on 11 May, 2023",
            "session_2": [
              {"speaker": "Ann", "dia_id": "D2:1", "text": "I work as a potter at the Alfama studio in Lisbon."},
              {"speaker": "Bo", "dia_id": "D2:2", "text": "My cat sleeps all afternoon long."}]},
            "qa": []}]"#;
        load_str("t", json).unwrap().samples()[0].clone()
    }

    fn spec(enabled: bool, threshold: f64) -> Ingest {
        Ingest {
            unit: IngestUnit::Window,
            window_size: 1,
            window_overlap: 0,
            min_chars: 0,
            dedup_threshold: 1.0,
            max_items_per_session: 100,
            stamp_date: true,
            extraction_prompt: "{turns}".into(),
            consolidate: Consolidate { enabled, threshold },
        }
    }

    #[test]
    fn the_older_near_duplicate_is_retired_with_its_turns() {
        let s = sample();
        let m = ingest(&s, &spec(true, 0.5), None).unwrap();
        let c = consolidate(&m, &s, &spec(true, 0.5));
        let ids: Vec<&str> = c.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, vec!["c/m0001", "c/m0002", "c/m0003"], "the baker item gives way to the potter one");
        assert_eq!(c.retired, 1);
        assert!(!c.holds(0), "the retired item's turn is lost, not merged into the newer item");
        assert_eq!(c.holders[2], vec![1]);
        assert_eq!(c.items[1].turns, vec![2], "the newer item keeps only its own turns");
        // Off, or a threshold the pair does not reach: the memory is unchanged.
        for sp in [spec(false, 0.5), spec(true, 0.95)] {
            let same = consolidate(&m, &s, &sp);
            assert_eq!(same.items.len(), m.items.len());
            assert_eq!(same.holders, m.holders);
            assert_eq!(same.retired, 0);
        }
    }

    #[test]
    fn a_checkpoint_sees_only_its_items() {
        // At the first session's checkpoint there is no newer telling: nothing retires.
        let s = sample();
        let first = s.prefix(1);
        let m = ingest(&first, &spec(true, 0.5), None).unwrap();
        assert_eq!(consolidate(&m, &first, &spec(true, 0.5)).retired, 0);
    }
}
