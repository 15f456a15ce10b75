//! Event records, canonical JSON and the hash chain.
//!
//! A record's hash is the SHA-256, as lowercase hex, of these bytes in this order:
//!
//! | field        | bytes                                                        |
//! |--------------|--------------------------------------------------------------|
//! | domain tag   | the 16 ASCII bytes `emend-journal/1\n`                       |
//! | seq          | 8 bytes, u64 big-endian                                      |
//! | kind length  | 8 bytes, u64 big-endian: the length of `kind` in UTF-8 bytes |
//! | kind         | `kind` as UTF-8                                              |
//! | payload len  | 8 bytes, u64 big-endian: the length of the canonical payload |
//! | payload      | [`canonical_json`] of the payload, UTF-8                     |
//! | prev_hash    | `prev_hash` as its ASCII bytes (64 hex digits when intact)   |
//!
//! Lengths make the layout unambiguous; `prev_hash` is last, so it needs none.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `prev_hash` of the first record: 64 zeros.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const HASH_DOMAIN: &[u8; 16] = b"emend-journal/1\n";

/// An event to append: a kind the engine defines and its JSON payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    pub kind: String,
    pub payload: Value,
}

impl NewEvent {
    pub fn new(kind: impl Into<String>, payload: Value) -> Self {
        NewEvent { kind: kind.into(), payload }
    }
}

/// A stored event: numbered, chained to the one before it, frozen.
///
/// `payload` has its object keys sorted recursively (see [`canonicalize`]), so that
/// serializing the record gives the same bytes every time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRecord {
    /// 1 for the first event, then contiguous.
    pub seq: u64,
    pub kind: String,
    pub payload: Value,
    /// `hash` of the record before, or [`ZERO_HASH`] for seq 1.
    pub prev_hash: String,
    /// SHA-256 over seq, kind, canonical payload and prev_hash (layout in the module doc).
    pub hash: String,
}

impl EventRecord {
    /// Number and chain a new event after the record whose hash is `prev_hash`.
    pub(crate) fn seal(seq: u64, event: NewEvent, prev_hash: &str) -> Self {
        let payload = canonicalize(event.payload);
        let hash = record_hash(seq, &event.kind, &payload, prev_hash);
        EventRecord { seq, kind: event.kind, payload, prev_hash: prev_hash.to_owned(), hash }
    }

    /// The hash this record should carry, recomputed from its other fields.
    pub fn compute_hash(&self) -> String {
        record_hash(self.seq, &self.kind, &self.payload, &self.prev_hash)
    }

    /// The record as one line of JSON (no trailing newline), fields in declaration order.
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::new();
        write_record(self, &mut out);
        // Only `write_canonical` and ASCII punctuation wrote to `out`: valid UTF-8.
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The stored form: the JSON line as bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        write_record(self, &mut out);
        out
    }

    /// Decode a stored record, plain JSON or zstd-compressed JSON (see [`maybe_decompress`]);
    /// the error text says what is wrong with the bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        let json = maybe_decompress(bytes)?;
        serde_json::from_slice(&json).map_err(|e| format!("the stored record is not valid: {e}"))
    }
}

/// The sled store keeps each record as its JSON line passed through [`compress`].
/// Stored records and read-view frames of at least this many bytes are zstd-compressed;
/// smaller ones gain little and stay plain JSON.
pub(crate) const COMPRESS_MIN: usize = 1024;

/// zstd level: 1 is the fastest, and JSON with repeated keys compresses well even so.
const ZSTD_LEVEL: i32 = 1;

/// The 4 bytes every zstd frame starts with. A JSON record starts with `{`, a view frame
/// body with `{` too, so the two never collide.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// `bytes` zstd-compressed (with the frame's content checksum) when it is at least
/// [`COMPRESS_MIN`] long, else unchanged.
pub(crate) fn compress(bytes: Vec<u8>) -> Vec<u8> {
    if bytes.len() < COMPRESS_MIN {
        return bytes;
    }
    let compressed = (|| -> std::io::Result<Vec<u8>> {
        let mut encoder = zstd::stream::Encoder::new(Vec::with_capacity(bytes.len() / 4), ZSTD_LEVEL)?;
        encoder.include_checksum(true)?;
        std::io::Write::write_all(&mut encoder, &bytes)?;
        encoder.finish()
    })();
    // Compressing into memory fails only on allocation; the plain form is equally valid.
    compressed.unwrap_or(bytes)
}

/// The plain bytes of a stored value: decompressed when it is a zstd frame, else as is.
pub(crate) fn maybe_decompress(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if bytes.starts_with(&ZSTD_MAGIC) {
        zstd::stream::decode_all(bytes)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| format!("the stored record does not decompress: {e}"))
    } else {
        Ok(std::borrow::Cow::Borrowed(bytes))
    }
}

/// The head of the chain: the last seq and its hash (0 and [`ZERO_HASH`] when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Head {
    /// The head of a journal with no events.
    pub fn empty() -> Self {
        Head { seq: 0, hash: ZERO_HASH.to_owned() }
    }
}

impl Default for Head {
    fn default() -> Self {
        Head::empty()
    }
}

fn record_hash(seq: u64, kind: &str, payload: &Value, prev_hash: &str) -> String {
    let payload = canonical_json_bytes(payload);
    let mut hasher = Sha256::new();
    hasher.update(HASH_DOMAIN);
    hasher.update(seq.to_be_bytes());
    hasher.update((kind.len() as u64).to_be_bytes());
    hasher.update(kind.as_bytes());
    hasher.update((payload.len() as u64).to_be_bytes());
    hasher.update(&payload);
    hasher.update(prev_hash.as_bytes());
    hex::encode(hasher.finalize())
}

/// A stored record's seq, prev_hash and hash, read from the fixed places [`write_record`]
/// puts them (the line's start and its last 154 bytes) without parsing the payload or
/// recomputing the hash. `None`: the line is not in that shape (decode it instead).
pub(crate) fn record_links(line: &[u8]) -> Option<(u64, &str, &str)> {
    const HEAD: &[u8] = b"{\"seq\":";
    const PREV: &[u8] = b",\"prev_hash\":\"";
    const HASH: &[u8] = b"\",\"hash\":\"";
    const END: &[u8] = b"\"}";
    let tail_len = PREV.len() + 64 + HASH.len() + 64 + END.len();
    let rest = line.strip_prefix(HEAD)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !rest[digits..].starts_with(b",\"kind\":") || line.len() < HEAD.len() + digits + tail_len {
        return None;
    }
    let seq = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let tail = &line[line.len() - tail_len..];
    fn hex64(b: &[u8]) -> Option<&str> {
        (b.len() == 64 && b.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)))
            .then(|| std::str::from_utf8(b).ok())
            .flatten()
    }
    let tail = tail.strip_prefix(PREV)?;
    let prev = hex64(&tail[..64])?;
    let tail = tail[64..].strip_prefix(HASH)?;
    let hash = hex64(&tail[..64])?;
    (&tail[64..] == END).then_some((seq, prev, hash))
}

fn write_record(record: &EventRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(record.seq.to_string().as_bytes());
    out.extend_from_slice(b",\"kind\":");
    write_json_string(&record.kind, out);
    out.extend_from_slice(b",\"payload\":");
    write_canonical(&record.payload, out);
    out.extend_from_slice(b",\"prev_hash\":");
    write_json_string(&record.prev_hash, out);
    out.extend_from_slice(b",\"hash\":");
    write_json_string(&record.hash, out);
    out.push(b'}');
}

/// Canonical JSON text of `value`: object keys sorted by their UTF-8 bytes at every
/// depth, no whitespace, strings and numbers as serde_json writes them.
///
/// This does not depend on the order of keys in the `Map` (with `preserve_order` that
/// is insertion order), so equal values always give equal text.
pub fn canonical_json(value: &Value) -> String {
    String::from_utf8_lossy(&canonical_json_bytes(value)).into_owned()
}

pub(crate) fn canonical_json_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_string(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_json_string(s: &str, out: &mut Vec<u8>) {
    write_scalar(s, out);
}

fn write_scalar<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing a JSON string or scalar into a Vec cannot fail: no I/O, no map key to reject.
    serde_json::to_writer(out, value).expect("serializing a JSON scalar into memory cannot fail");
}

/// The same value with object keys sorted recursively, so that serde_json (which keeps
/// insertion order here) writes it canonically.
pub fn canonicalize(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            Value::Object(entries.into_iter().map(|(k, v)| (k, canonicalize(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonicalize).collect()),
        scalar => scalar,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a = json!({"b": 1, "a": {"z": [ {"y": 1, "x": 2} ], "c": null}});
        assert_eq!(canonical_json(&a), r#"{"a":{"c":null,"z":[{"x":2,"y":1}]},"b":1}"#);
        let b: Value = serde_json::from_str(r#"{"a":{"z":[{"x":2,"y":1}],"c":null},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
    }

    #[test]
    fn canonical_json_keeps_number_kinds_and_escapes() {
        let v = json!({"f": 1.0, "i": 1, "n": -3, "s": "a\"b\n", "u": "é"});
        assert_eq!(canonical_json(&v), "{\"f\":1.0,\"i\":1,\"n\":-3,\"s\":\"a\\\"b\\n\",\"u\":\"é\"}");
    }

    #[test]
    fn hash_covers_every_field() {
        let base = EventRecord::seal(1, NewEvent::new("k", json!({"a": 1})), ZERO_HASH);
        assert_eq!(base.hash.len(), 64);
        assert_eq!(base.compute_hash(), base.hash);
        let variants = [
            EventRecord { seq: 2, ..base.clone() },
            EventRecord { kind: "j".into(), ..base.clone() },
            EventRecord { payload: json!({"a": 2}), ..base.clone() },
            EventRecord { prev_hash: "1".repeat(64), ..base.clone() },
        ];
        for v in variants {
            assert_ne!(v.compute_hash(), base.hash, "{v:?}");
        }
    }

    #[test]
    fn hash_is_independent_of_key_insertion_order() {
        let a: Value = serde_json::from_str(r#"{"x":1,"y":2}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y":2,"x":1}"#).unwrap();
        let ra = EventRecord::seal(1, NewEvent::new("k", a), ZERO_HASH);
        let rb = EventRecord::seal(1, NewEvent::new("k", b), ZERO_HASH);
        assert_eq!(ra.hash, rb.hash);
        assert_eq!(ra.to_json_line(), rb.to_json_line());
    }

    #[test]
    fn kind_and_payload_boundary_is_unambiguous() {
        // Without length prefixes "ab" + "c" and "a" + "bc" could collide.
        let a = EventRecord::seal(1, NewEvent::new("ab", json!("c")), ZERO_HASH);
        let b = EventRecord::seal(1, NewEvent::new("a", json!("bc")), ZERO_HASH);
        assert_ne!(a.hash, b.hash);
    }

    #[test]
    fn encode_decode_round_trips_and_rehashes_equal() {
        let payload = json!({"p": 0.1, "q": 1e300, "r": -0.0, "s": 0.1_f64 + 0.2, "t": 5e-324, "u": 2.225_073_858_507_201_4e-308, "big": u64::MAX});
        let r = EventRecord::seal(7, NewEvent::new("k", payload), &"a".repeat(64));
        let back = EventRecord::decode(&r.encode()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.compute_hash(), r.hash);
        assert_eq!(back.to_json_line(), r.to_json_line());
    }

    #[test]
    fn json_line_has_fields_in_declaration_order() {
        let r = EventRecord::seal(1, NewEvent::new("k", json!({"b": 1, "a": 2})), ZERO_HASH);
        let line = r.to_json_line();
        assert!(line.starts_with(r#"{"seq":1,"kind":"k","payload":{"a":2,"b":1},"prev_hash":"000"#), "{line}");
        assert!(line.ends_with(&format!(r#""hash":"{}"}}"#, r.hash)), "{line}");
    }
}
