//! Stage 5, answer: what the system replies, given the assembled context.
//!
//! Without an answerer model the answer is extractive ([`Extractive`]): the
//! context sentence covering the most distinct question terms (ties: the
//! earliest in the context), without its speaker; `short` keeps its first
//! [`SHORT_WORDS`] words that are neither question words nor stopwords. No
//! sentence sharing a term with the question gives no answer. An LLM
//! answerer plugs in through [`Answerer`]; only it reads `answer.prompt`.

use crate::assemble::ContextLine;
use crate::strategy::{Answer, AnswerFormat};
use crate::text::{for_each_term, is_stopword, terms, words};

/// Words kept by the extractive answerer's `short` format.
pub const SHORT_WORDS: usize = 6;

/// An answerer model failed.
#[derive(Debug, thiserror::Error)]
#[error("answerer {answerer}: {message}")]
pub struct AnswerError {
    pub answerer: String,
    pub message: String,
}

/// What an answerer sees.
pub struct AnswerInput<'a> {
    pub question: &'a str,
    /// The context, line by line; [`crate::assemble::render`] gives the text a
    /// prompt's `{context}` receives.
    pub lines: &'a [ContextLine],
}

/// The answer stage's plug-in point.
pub trait Answerer: Send + Sync {
    /// Identity (endpoint, model, version); part of cache keys.
    fn id(&self) -> String;
    /// True when answers are worth caching (a model call); false for cheap deterministic ones.
    fn cacheable(&self) -> bool {
        true
    }
    fn answer(&self, input: &AnswerInput<'_>, spec: &Answer) -> Result<Option<String>, AnswerError>;
    /// Answers many questions (the evaluator calls this once per stage with
    /// every answer it needs); results in input order. A model overrides it
    /// to run the calls concurrently.
    fn answer_batch(&self, inputs: &[AnswerInput<'_>], spec: &Answer) -> Vec<Result<Option<String>, AnswerError>> {
        inputs.iter().map(|i| self.answer(i, spec)).collect()
    }
}

/// The built-in, model-free answerer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

impl Answerer for Extractive {
    fn id(&self) -> String {
        "extractive/1".into()
    }

    fn cacheable(&self) -> bool {
        false
    }

    fn answer(&self, input: &AnswerInput<'_>, spec: &Answer) -> Result<Option<String>, AnswerError> {
        Ok(extract(input.question, input.lines, spec.format))
    }
}

fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    for i in 0..b.len() {
        if matches!(b[i], b'.' | b'!' | b'?') && (i + 1 == b.len() || b[i + 1] == b' ') {
            out.push(text[start..=i].trim());
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(text[start..].trim());
    }
    out.retain(|s| !s.is_empty());
    out
}

/// How many distinct terms of `q` (sorted, lowercased, at most 64, no
/// stopwords) the sentence contains. (The ASCII fast path of [`extract`]
/// computes the same in place: a stopword never equals a question term.)
fn coverage(sentence: &str, q: &[String]) -> u32 {
    let mut seen = 0u64;
    for_each_term(sentence, |w| seen |= matches(w, q));
    seen.count_ones()
}

/// The bit of each term of `q` equal to `w` (ASCII case ignored).
fn matches(w: &str, q: &[String]) -> u64 {
    let mut bits = 0;
    for (i, t) in q.iter().enumerate() {
        if t.len() == w.len() && t.eq_ignore_ascii_case(w) {
            bits |= 1 << i;
        }
    }
    bits
}

/// The extractive answer.
pub fn extract(question: &str, lines: &[ContextLine], format: AnswerFormat) -> Option<String> {
    let mut q: Vec<String> = terms(question);
    q.sort_unstable();
    q.dedup();
    q.truncate(64);
    if q.is_empty() {
        return None;
    }
    let mut best: Option<(u32, &str)> = None;
    // Strictly better only, so ties go to the earliest sentence.
    fn consider<'a>(best: &mut Option<(u32, &'a str)>, cover: u32, s: &'a str) {
        let s = s.trim();
        if cover > 0 && !s.is_empty() && best.is_none_or(|(c, _)| cover > c) {
            *best = Some((cover, s));
        }
    }
    for line in lines {
        let text = line.text.as_str();
        if !text.is_ascii() {
            for s in sentences(text) {
                consider(&mut best, coverage(s, &q), s);
            }
            continue;
        }
        // One pass over the bytes: words are matched as sentences are delimited.
        let b = text.as_bytes();
        let (mut start, mut i, mut seen) = (0, 0, 0u64);
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_alphanumeric() {
                let w = i;
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                seen |= matches(&text[w..i], &q);
                continue;
            }
            if matches!(c, b'.' | b'!' | b'?') && (i + 1 == b.len() || b[i + 1] == b' ') {
                consider(&mut best, seen.count_ones(), &text[start..=i]);
                start = i + 1;
                seen = 0;
            }
            i += 1;
        }
        if start < b.len() {
            consider(&mut best, seen.count_ones(), &text[start..]);
        }
    }
    let (_, sentence) = best?;
    Some(match format {
        AnswerFormat::Sentence => sentence.to_string(),
        AnswerFormat::Short => {
            let qw = words(question);
            let kept: Vec<String> =
                words(sentence).into_iter().filter(|w| !is_stopword(w) && !qw.contains(w)).take(SHORT_WORDS).collect();
            if kept.is_empty() { sentence.to_string() } else { kept.join(" ") }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str) -> ContextLine {
        ContextLine { block: 0, speaker: Some("Ann".into()), text: t.into() }
    }

    #[test]
    fn picks_the_sentence_covering_most_question_terms() {
        let lines = [line("Hi there. I love the beach."), line("My dog Biscuit is a beagle! He loves the beach.")];
        let q = "What breed is Ann's dog Biscuit?";
        let q0 = q;
        assert_eq!(extract(q, &lines, AnswerFormat::Sentence).as_deref(), Some("My dog Biscuit is a beagle!"));
        assert_eq!(extract(q, &lines, AnswerFormat::Short).as_deref(), Some("beagle"));
        assert_eq!(extract("Who won the cup?", &lines, AnswerFormat::Short), None);
        let q = vec!["beagle".to_string(), "biscuit".to_string()];
        assert_eq!(coverage("BISCUIT the Beagle, biscuit!", &q), 2);
        assert_eq!(coverage("Bíscuit the beagle", &q), 1);
        // Non-ASCII lines take the general path and agree with the fast one.
        let mixed = [line("Café time. My dog Biscuit is a beagle! He loves the beach.")];
        assert_eq!(extract(q0, &mixed, AnswerFormat::Sentence).as_deref(), Some("My dog Biscuit is a beagle!"));
    }
}
