//! The tree pass's record, `.hipify-state.json` (tools/hipify/tree.py: `_load_state`, `_Processed.record`,
//! `_from_cache`, the state written at the end of `hipify_tree`).
//!
//! Reading is strict: a record in the exact shape the tree pass writes (by either implementation) is used;
//! what Python would read the same way (no file, not a JSON object, another schema, `files` not an object,
//! an entry that is not an object) is handled as Python handles it; anything else (an entry of another
//! shape, JSON that serde refuses but Python might accept) is `Err`: the caller then leaves the run to Python.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::json;

pub const STATE_FILE: &str = ".hipify-state.json";
pub const STATE_SCHEMA: &str = "monarch-runtime/hipify-state/v1";

/// (line, column, name, kind, reason, suggestion, blocking, rule)
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct FindingRow(
    pub i64,
    pub i64,
    pub String,
    pub String,
    pub String,
    pub String,
    pub bool,
    pub String,
);

/// (out_start, out_end, spelling, angled, mapped)
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct IncludeRow(pub i64, pub i64, pub String, pub bool, pub bool);

/// (start, end, new text) of an edit the tree pass makes to a translated file
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct EditRow(pub i64, pub i64, pub String);

/// One file's record, as `_Processed.record()` plus `out`, `edits`, `out_size`, `out_mtime_ns`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub sha: String,
    pub mode: String,
    pub changed: bool,
    pub findings: Vec<FindingRow>,
    pub includes: Vec<IncludeRow>,
    pub defines: Vec<String>,
    pub facts: (i64, i64, i64),
    pub unresolved: Vec<String>,
    pub out: String,
    pub edits: Vec<EditRow>,
    #[serde(default)]
    pub out_size: Option<i64>,
    #[serde(default)]
    pub out_mtime_ns: Option<i64>,
}

/// A value of the previous record's `files`: an entry, or something Python ignores (not an object).
#[derive(Debug)]
pub enum Prev {
    Entry(Box<Entry>),
    Other,
}

/// The previous run's record, as `_load_state` and `hipify_tree` see it.
#[derive(Debug, Default)]
pub struct State {
    /// `previous.get("fingerprint")` when it is a string
    pub fingerprint: Option<String>,
    /// `previous.get("files")` when it is an object (else empty)
    pub files: BTreeMap<String, Prev>,
}

struct PrevVisitor;

impl<'de> Visitor<'de> for PrevVisitor {
    type Value = Prev;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Prev, A::Error> {
        Entry::deserialize(de::value::MapAccessDeserializer::new(map))
            .map(|e| Prev::Entry(Box::new(e)))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Prev, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Prev::Other)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
    fn visit_unit<E>(self) -> Result<Prev, E> {
        Ok(Prev::Other)
    }
}

impl<'de> Deserialize<'de> for Prev {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Prev, D::Error> {
        d.deserialize_any(PrevVisitor)
    }
}

/// `files`: an object of entries, or anything else (then Python uses `{}`).
struct Files(Option<BTreeMap<String, Prev>>);

struct FilesVisitor;

impl<'de> Visitor<'de> for FilesVisitor {
    type Value = Files;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Files, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((k, v)) = map.next_entry::<String, Prev>()? {
            out.insert(k, v); // (a repeated key: the last wins, as in Python)
        }
        Ok(Files(Some(out)))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Files, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Files(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Files, E> {
        Ok(Files(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Files, E> {
        Ok(Files(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Files, E> {
        Ok(Files(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Files, E> {
        Ok(Files(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Files, E> {
        Ok(Files(None))
    }
    fn visit_unit<E>(self) -> Result<Files, E> {
        Ok(Files(None))
    }
}

impl<'de> Deserialize<'de> for Files {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Files, D::Error> {
        d.deserialize_any(FilesVisitor)
    }
}

/// The top level: (is an object, schema, fingerprint, files)
struct Top(
    Option<(
        Option<serde_json::Value>,
        Option<serde_json::Value>,
        Option<Files>,
    )>,
);

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let (mut schema, mut fingerprint, mut files) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "schema" => schema = Some(map.next_value::<serde_json::Value>()?),
                "fingerprint" => fingerprint = Some(map.next_value::<serde_json::Value>()?),
                "files" => files = Some(map.next_value_seed(FilesSeed)?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top(Some((schema, fingerprint, files))))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top(None))
    }
    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top(None))
    }
}

struct FilesSeed;

impl<'de> DeserializeSeed<'de> for FilesSeed {
    type Value = Files;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Files, D::Error> {
        Files::deserialize(d)
    }
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

/// Whether Python's json.loads may accept what serde_json refused (`err`) as JSON: NaN and the infinities,
/// lone surrogate escapes, numbers beyond serde_json's range, nesting deeper than its limit.
fn python_may_read(bytes: &[u8], err: &serde_json::Error) -> bool {
    let why = err.to_string();
    if why.contains("recursion limit") || why.contains("out of range") {
        return true;
    }
    let has = |needle: &[u8]| memchr::memmem::find(bytes, needle).is_some();
    has(b"NaN") || has(b"Infinity") || has(b"\\ud") || has(b"\\uD")
}

/// `_load_state` on the file's bytes (`None`: no file). `Err`: not decidable here (see the module doc).
pub fn parse_state(bytes: Option<&[u8]>) -> Result<State, String> {
    let Some(bytes) = bytes else {
        return Ok(State::default());
    };
    let top: Top = match serde_json::from_slice(bytes) {
        Ok(t) => t,
        Err(e)
            if e.classify() != serde_json::error::Category::Data && !python_may_read(bytes, &e) =>
        {
            return Ok(State::default()); // not JSON for Python either: `{}`
        }
        Err(e) => return Err(format!("state file: {e}")),
    };
    let Some((schema, fingerprint, files)) = top.0 else {
        return Ok(State::default());
    };
    if schema.as_ref().and_then(|s| s.as_str()) != Some(STATE_SCHEMA) {
        return Ok(State::default());
    }
    Ok(State {
        fingerprint: fingerprint.and_then(|f| f.as_str().map(str::to_string)),
        files: files.and_then(|f| f.0).unwrap_or_default(),
    })
}

/// A record the tree pass writes (an `Entry` with `out_size`/`out_mtime_ns` when the output could be stat'ed).
pub struct Record<'a> {
    pub sha: &'a str,
    pub mode: &'a str,
    pub changed: bool,
    pub findings: &'a [FindingRow],
    pub includes: &'a [IncludeRow],
    pub defines: &'a [String],
    pub facts: (i64, i64, i64),
    pub unresolved: &'a [String],
    pub out: &'a str,
    pub edits: &'a [EditRow],
    pub out_stat: Option<(i64, i64)>,
}

fn str_list(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::string(out, s);
    }
    out.push(b']');
}

/// `json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n"` for the state the tree pass writes.
pub fn dump_state<'a>(
    fingerprint: &str,
    records: impl Iterator<Item = (&'a str, &'a Record<'a>)>,
    capacity: usize,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(b"{\"files\":{");
    for (i, (path, r)) in records.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::string(&mut out, path);
        out.extend_from_slice(b":{\"changed\":");
        json::boolean(&mut out, r.changed);
        out.extend_from_slice(b",\"defines\":");
        str_list(&mut out, r.defines);
        out.extend_from_slice(b",\"edits\":[");
        for (j, e) in r.edits.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'[');
            json::int(&mut out, e.0);
            out.push(b',');
            json::int(&mut out, e.1);
            out.push(b',');
            json::string(&mut out, &e.2);
            out.push(b']');
        }
        out.extend_from_slice(b"],\"facts\":[");
        json::int(&mut out, r.facts.0);
        out.push(b',');
        json::int(&mut out, r.facts.1);
        out.push(b',');
        json::int(&mut out, r.facts.2);
        out.extend_from_slice(b"],\"findings\":[");
        for (j, f) in r.findings.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'[');
            json::int(&mut out, f.0);
            out.push(b',');
            json::int(&mut out, f.1);
            for s in [&f.2, &f.3, &f.4, &f.5] {
                out.push(b',');
                json::string(&mut out, s);
            }
            out.push(b',');
            json::boolean(&mut out, f.6);
            out.push(b',');
            json::string(&mut out, &f.7);
            out.push(b']');
        }
        out.extend_from_slice(b"],\"includes\":[");
        for (j, inc) in r.includes.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'[');
            json::int(&mut out, inc.0);
            out.push(b',');
            json::int(&mut out, inc.1);
            out.push(b',');
            json::string(&mut out, &inc.2);
            out.push(b',');
            json::boolean(&mut out, inc.3);
            out.push(b',');
            json::boolean(&mut out, inc.4);
            out.push(b']');
        }
        out.extend_from_slice(b"],\"mode\":");
        json::string(&mut out, r.mode);
        out.extend_from_slice(b",\"out\":");
        json::string(&mut out, r.out);
        if let Some((size, mtime)) = r.out_stat {
            out.extend_from_slice(b",\"out_mtime_ns\":");
            json::int(&mut out, mtime);
            out.extend_from_slice(b",\"out_size\":");
            json::int(&mut out, size);
        }
        out.extend_from_slice(b",\"sha\":");
        json::string(&mut out, r.sha);
        out.extend_from_slice(b",\"unresolved\":");
        str_list(&mut out, r.unresolved);
        out.push(b'}');
    }
    out.extend_from_slice(b"},\"fingerprint\":");
    json::string(&mut out, fingerprint);
    out.extend_from_slice(b",\"schema\":");
    json::string(&mut out, STATE_SCHEMA);
    out.extend_from_slice(b"}\n");
    out
}
