//! The plan's per-name actions (`Translator.export_plan()["names"]`: rows `[name, replacement or null, finding
//! or -1, flags]`) as one table built while the JSON is parsed: names and replacements in one byte arena, an
//! open-addressing index over it. The plan is parsed at every start-up (~9,300 rows) and the table is looked
//! up for every candidate identifier of every file, so both are kept lean: no allocation per row, one hash
//! and one comparison per lookup.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

use super::types::from_latin1;

/// namespace-only (`_Action.namespace_only`)
pub const NS: u8 = 1;
/// a warp-sync name on a target that changes them (`_Action.sync`)
pub const SYNC: u8 = 2;
/// returns the nodiscard type (`_Action.stmt`)
pub const STMT: u8 = 4;
/// a downgrade applies (`_Action.downgrade`)
pub const DOWNGRADE: u8 = 8;
/// the lane mask is the first argument (`name in masks.MASKED`): only read with SYNC or DOWNGRADE
pub const MASKED: u8 = 16;
/// a plain rename (`_Action.simple`): set here, not in the plan
pub const SIMPLE: u8 = 32;
/// nothing to do (`_NO_ACTION`): set here, not in the plan
pub const NONE: u8 = 64;
/// the bits that make an action more than a plain rename (or nothing)
const ACTING: u8 = NS | SYNC | STMT | DOWNGRADE;
const PLAN_FLAGS: u8 = ACTING | MASKED;
const NO_TEXT: u32 = u32::MAX;

/// One name's decision (translate.py `_Action`), its texts in the table's arena.
#[derive(Clone, Copy, Debug)]
pub struct Action {
    name: (u32, u32),
    replacement: (u32, u32),
    /// index into the plan's findings, or -1
    pub finding: i32,
    pub flags: u8,
}

/// The per-name actions: name -> Action.
#[derive(Clone, Debug, Default)]
pub struct NameTable {
    arena: Vec<u8>,
    actions: Vec<Action>,
    /// open addressing: index into `actions`, or u32::MAX
    slots: Vec<u32>,
}

#[inline]
fn hash(name: &[u8]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mut h = name.len() as u64;
    let mut chunks = name.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

impl NameTable {
    #[inline]
    fn text(&self, span: (u32, u32)) -> &[u8] {
        &self.arena[span.0 as usize..(span.0 + span.1) as usize]
    }

    pub fn name(&self, a: &Action) -> &[u8] {
        self.text(a.name)
    }

    #[inline]
    pub fn replacement(&self, a: &Action) -> Option<&[u8]> {
        (a.replacement.0 != NO_TEXT).then(|| self.text(a.replacement))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter()
    }

    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<&Action> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(name) as usize & mask;
        loop {
            let k = self.slots[i];
            if k == u32::MAX {
                return None;
            }
            let a = &self.actions[k as usize];
            if self.text(a.name) == name {
                return Some(a);
            }
            i = (i + 1) & mask;
        }
    }

    fn push_text(&mut self, text: &str) -> Result<(u32, u32), String> {
        let start = self.arena.len();
        if text.is_ascii() {
            self.arena.extend_from_slice(text.as_bytes());
        } else {
            let b = from_latin1(text)
                .ok_or_else(|| format!("translate plan: name row text {text:?} is not Latin-1"))?;
            self.arena.extend_from_slice(&b);
        }
        let len = self.arena.len() - start;
        if self.arena.len() > u32::MAX as usize - 1 {
            return Err("translate plan: too many names".to_string());
        }
        Ok((start as u32, len as u32))
    }

    fn index(&mut self) {
        let size = (self.actions.len() * 2).next_power_of_two().max(16);
        self.slots = vec![u32::MAX; size];
        let mask = size - 1;
        for k in 0..self.actions.len() {
            let name = self.text(self.actions[k].name);
            let mut i = hash(name) as usize & mask;
            loop {
                let s = self.slots[i];
                if s == u32::MAX {
                    self.slots[i] = k as u32;
                    break;
                }
                if self.text(self.actions[s as usize].name) == name {
                    self.slots[i] = k as u32; // a later row of the same name wins (as a dict would)
                    break;
                }
                i = (i + 1) & mask;
            }
        }
    }
}

/// A JSON string, borrowed from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for NameTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Rows;
        impl<'de> Visitor<'de> for Rows {
            type Value = NameTable;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of [name, replacement, finding, flags] rows")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NameTable, A::Error> {
                let n = seq.size_hint().unwrap_or(0);
                let mut t = NameTable {
                    arena: Vec::with_capacity(n * 40),
                    actions: Vec::with_capacity(n),
                    slots: Vec::new(),
                };
                type Row<'a> = (Str<'a>, Option<Str<'a>>, i32, u8);
                while let Some((name, repl, finding, flags)) = seq.next_element::<Row<'de>>()? {
                    let name = t.push_text(&name.0).map_err(serde::de::Error::custom)?;
                    let replacement = match repl {
                        None => (NO_TEXT, 0),
                        Some(r) => t.push_text(&r.0).map_err(serde::de::Error::custom)?,
                    };
                    let mut flags = flags & PLAN_FLAGS;
                    if flags & ACTING == 0 && finding < 0 {
                        flags |= if replacement.0 != NO_TEXT {
                            SIMPLE
                        } else {
                            NONE
                        };
                    }
                    t.actions.push(Action {
                        name,
                        replacement,
                        finding,
                        flags,
                    });
                }
                t.index();
                Ok(t)
            }
        }
        d.deserialize_seq(Rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let t: NameTable = serde_json::from_str(
            r#"[["cudaMalloc", "hipMalloc", -1, 0], ["cub", "hipcub", -1, 1], ["x\u00e9", null, 3, 4],
                ["cudaMalloc", "hipMalloc2", -1, 0], ["none", null, -1, 0]]"#,
        )
        .unwrap();
        let a = t.get(b"cudaMalloc").unwrap();
        assert_eq!(t.replacement(a), Some(&b"hipMalloc2"[..]));
        assert_eq!(a.flags, SIMPLE);
        assert_eq!(t.get(b"cub").unwrap().flags, NS);
        let e = t.get(b"x\xe9").unwrap();
        assert_eq!((e.finding, e.flags, t.replacement(e)), (3, STMT, None));
        assert_eq!(t.get(b"none").unwrap().flags, NONE);
        assert!(t.get(b"cudaFree").is_none());
        assert!(t.get(b"").is_none());
        assert!(serde_json::from_str::<NameTable>(r#"[["\u0100", null, -1, 0]]"#).is_err());
    }
}
