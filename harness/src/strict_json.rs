//! JSON read strictly: an object that names a key twice is refused.
//!
//! serde_json keeps the last of duplicate keys without a word, so a dataset,
//! an outcome file or a record with `"answer"` twice would be read as whichever
//! came last. [`from_str`] first walks the text with a visitor that remembers
//! each object's keys, and fails on the second occurrence with serde_json's
//! own position (`duplicate key "id" at line 3 column 9`); then it parses as
//! serde_json would.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeOwned, Deserializer, Error, MapAccess, SeqAccess, Visitor};

/// Nothing but the check: every object's keys are distinct.
struct Distinct;

impl<'de> serde::Deserialize<'de> for Distinct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Distinct, D::Error> {
        d.deserialize_any(DistinctVisitor)
    }
}

struct DistinctVisitor;

impl<'de> Visitor<'de> for DistinctVisitor {
    type Value = Distinct;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: Error>(self, _: bool) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_i64<E: Error>(self, _: i64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_u64<E: Error>(self, _: u64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_f64<E: Error>(self, _: f64) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_str<E: Error>(self, _: &str) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_unit<E: Error>(self) -> Result<Distinct, E> {
        Ok(Distinct)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Distinct, A::Error> {
        while seq.next_element::<Distinct>()?.is_some() {}
        Ok(Distinct)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Distinct, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format!("duplicate key {key:?}")));
            }
            map.next_value::<Distinct>()?;
            seen.insert(key);
        }
        Ok(Distinct)
    }
}

/// Refuses the first key an object names twice, with its line and column.
pub fn check(text: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Distinct>(text).map(|_| ())
}

/// [`serde_json::from_str`], refusing duplicate keys first ([`check`]).
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    check(text)?;
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicate_key_is_refused_with_its_position_at_any_depth() {
        let err = from_str::<serde_json::Value>("{\"a\": 1,\n \"b\": [{\"x\": 1, \"x\": 2}]}").unwrap_err();
        assert_eq!(err.to_string(), "duplicate key \"x\" at line 2 column 19");
        let err = check("{\"id\": \"q1\", \"answer\": \"a\", \"id\": \"q2\"}").unwrap_err();
        assert_eq!((err.line(), err.column(), err.to_string().starts_with("duplicate key \"id\"")), (1, 32, true));
        // The same key in sibling objects, and escapes that make two spellings one key.
        assert!(check("[{\"a\": 1}, {\"a\": 2}, {\"b\": {\"a\": 3}}]").is_ok());
        assert!(check("{\"a\": 1, \"\\u0061\": 2}").is_err());
        let v: serde_json::Value = from_str("{\"n\": 1.5, \"s\": null, \"t\": true}").unwrap();
        assert_eq!(v["n"], 1.5);
        assert!(from_str::<serde_json::Value>("{\"a\": }").unwrap_err().to_string().contains("line 1"));
    }
}
