//! tools/hipify/masks.py in Rust: the lane mask of a warp `*_sync` call (what it is, so the translation can
//! widen it or say why it cannot), and the constant masks the project's headers define.
//!
//! The Python module is the reference; every function here names the one it follows and keeps its exact
//! semantics (its regexes are byte loops here, or `regex::bytes` with `(?-u)` where the pattern's
//! backtracking is the point). Texts (`Mask::how`, a constant's "how") are bytes: Python's Latin-1 `str`.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use regex::bytes::Regex;

/// lanes 32-63: OR-ed into a full-warp mask held by a name (masks.py's UPPER_LANES)
pub const UPPER_LANES: &str = "0xffffffff00000000ULL";

const MASK64_CALLS: [&[u8]; 5] = [
    b"__ballot",
    b"__ballot64",
    b"__ballot_sync",
    b"__match_any_sync",
    b"__match_all_sync",
];

/// The classes of a mask (masks.py's FULL32 ... RUNTIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Full32,
    Full64,
    Active,
    Active32,
    Wide,
    Partial,
    Runtime,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Full32 => "full32",
            Class::Full64 => "full64",
            Class::Active => "active",
            Class::Active32 => "active32",
            Class::Wide => "wide",
            Class::Partial => "partial",
            Class::Runtime => "runtime",
        }
    }
}

/// (value as unsigned bits, width, signed)
pub type Value = (u64, u32, bool);

/// What a mask argument is (masks.py's Mask): `how` is the explanation for findings (Latin-1 bytes);
/// `unresolved` a name defined neither in the file nor in the known project masks (Python's `b""`: None).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    pub cls: Class,
    pub how: Vec<u8>,
    pub unresolved: Option<Vec<u8>>,
}

impl Mask {
    fn new(cls: Class, how: Vec<u8>) -> Mask {
        Mask {
            cls,
            how,
            unresolved: None,
        }
    }
}

/// One row of masks.py's ProjectMasks: `(name, how, value, width, signed)` (name and how: Latin-1 bytes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectMask {
    pub name: Vec<u8>,
    pub how: Vec<u8>,
    pub value: u64,
    pub width: u32,
    pub signed: bool,
}

/// masks.py's ProjectMasks (merge_header_masks's result: sorted by name, names unique).
pub type ProjectMasks = Vec<ProjectMask>;

impl serde::Serialize for ProjectMask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(5)?;
        t.serialize_element(&super::types::latin1(&self.name))?;
        t.serialize_element(&super::types::latin1(&self.how))?;
        t.serialize_element(&self.value)?;
        t.serialize_element(&self.width)?;
        t.serialize_element(&self.signed)?;
        t.end()
    }
}

impl<'de> serde::Deserialize<'de> for ProjectMask {
    /// The JSON form of the Python tuple: `[name, how, value, width, signed]`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ProjectMask, D::Error> {
        let (name, how, value, width, signed): (String, String, u64, u32, bool) =
            serde::Deserialize::deserialize(d)?;
        let bad = || serde::de::Error::custom("a project mask's text has a char >= 256");
        Ok(ProjectMask {
            name: super::types::from_latin1(&name).ok_or_else(bad)?,
            how: super::types::from_latin1(&how).ok_or_else(bad)?,
            value,
            width,
            signed,
        })
    }
}

/// masks.py's Known: the project headers' constant masks, name -> (how, value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    map: HashMap<Vec<u8>, (Vec<u8>, Value)>,
}

impl Known {
    pub fn get(&self, name: &[u8]) -> Option<&(Vec<u8>, Value)> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(name)
    }
}

/// `merge_header_masks`'s table as `classify` takes it (masks.py's known_masks).
pub fn known_masks(table: &[ProjectMask]) -> Known {
    let mut map = HashMap::with_capacity(table.len());
    for row in table {
        map.insert(
            row.name.clone(),
            (row.how.clone(), (row.value, row.width, row.signed)),
        );
    }
    Known { map }
}

// -- byte classes ------------------------------------------------------------------------------------------

/// Python's bytes `\s` (and `bytes.strip()`/`split()`'s whitespace): [ \t\n\r\f\v]
#[inline]
fn is_ws(c: u8) -> bool {
    c == b' ' || (0x09..=0x0d).contains(&c)
}

/// bytes `\w`: [A-Za-z0-9_]
#[inline]
fn is_w(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

#[inline]
fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

/// masks.py's _IDC_BYTES: identifier bytes (non-ASCII included)
#[inline]
fn is_idc(c: u8) -> bool {
    is_w(c) || c >= 0x80
}

#[inline]
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn strip(text: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = text.len();
    while a < b && is_ws(text[a]) {
        a += 1;
    }
    while b > a && is_ws(text[b - 1]) {
        b -= 1;
    }
    &text[a..b]
}

fn rstrip(text: &[u8]) -> &[u8] {
    let mut b = text.len();
    while b > 0 && is_ws(text[b - 1]) {
        b -= 1;
    }
    &text[..b]
}

/// `_WS.sub(b" ", text)`: each run of whitespace becomes one space.
fn ws_collapse(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut in_ws = false;
    for &c in text {
        if is_ws(c) {
            if !in_ws {
                out.push(b' ');
            }
            in_ws = true;
        } else {
            out.push(c);
            in_ws = false;
        }
    }
    out
}

/// `_norm_type(words)`: stripped, whitespace runs made one space.
fn norm_type(words: &[u8]) -> Vec<u8> {
    ws_collapse(strip(words))
}

/// The whitespace-separated words of `text` (`bytes.split()`).
fn words_of(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&c| is_ws(c)).filter(|w| !w.is_empty())
}

/// `data[a:b]` as Python slices it (clamped; empty when `a >= b`).
fn py_slice(data: &[u8], a: usize, b: usize) -> &[u8] {
    let b = b.min(data.len());
    if a >= b {
        &[]
    } else {
        &data[a..b]
    }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

fn hex(v: u64) -> Vec<u8> {
    format!("{v:#x}").into_bytes()
}

// -- types -------------------------------------------------------------------------------------------------

const QUALIFIERS: [&[u8]; 11] = [
    b"const",
    b"constexpr",
    b"static",
    b"volatile",
    b"inline",
    b"__device__",
    b"__host__",
    b"__constant__",
    b"__shared__",
    b"__forceinline__",
    b"register",
];

fn type_spec(name: &[u8]) -> Option<(u32, bool)> {
    Some(match name {
        b"int" | b"signed" | b"signed int" | b"int32_t" | b"std::int32_t" | b"short"
        | b"short int" => (32, true),
        b"unsigned" | b"unsigned int" | b"uint" | b"uint32_t" | b"std::uint32_t"
        | b"__uint32_t" | b"unsigned short" => (32, false),
        b"long" | b"long int" | b"long long" | b"long long int" | b"signed long"
        | b"signed long long" => (64, true),
        b"int64_t" | b"std::int64_t" | b"__int64_t" | b"ptrdiff_t" | b"intptr_t" => (64, true),
        b"unsigned long"
        | b"unsigned long int"
        | b"unsigned long long"
        | b"unsigned long long int"
        | b"ulong"
        | b"ulonglong"
        | b"uint64_t"
        | b"std::uint64_t"
        | b"__uint64_t"
        | b"size_t"
        | b"std::size_t"
        | b"uintptr_t" => (64, false),
        _ => return None,
    })
}

/// (width, signed) of the integer type spelled `words` (qualifiers allowed); None when unknown (int_type).
pub fn int_type(words: &[u8]) -> Option<(u32, bool)> {
    let mut kept: Vec<u8> = Vec::with_capacity(words.len());
    for w in words_of(words) {
        if QUALIFIERS.contains(&w) {
            continue;
        }
        if !kept.is_empty() {
            kept.push(b' ');
        }
        kept.extend_from_slice(w);
        if kept.len() > 32 {
            return None; // longer than any type name
        }
    }
    type_spec(&kept)
}

#[inline]
fn width_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// C's conversion of `value` to an integer type of `width` bits (_convert).
fn convert(value: Value, width: u32, signed: bool) -> Value {
    let (mut v, w, s) = value;
    if width > w && s && w >= 1 && (v >> (w - 1)) & 1 == 1 {
        v |= width_mask(width) ^ width_mask(w);
    }
    (v & width_mask(width), width, signed)
}

// -- the constant-expression evaluator (_Expr) -------------------------------------------------------------

/// deepest nesting of parentheses and unary operators evaluated (deeper: not a constant); masks.py's
/// `_Expr.MAX_NESTING`
const MAX_NESTING: usize = 64;

type Resolve<'r> = &'r mut dyn FnMut(&[u8]) -> Option<Value>;

struct Expr<'a, 'r> {
    text: &'a [u8],
    toks: Vec<(usize, usize)>,
    i: usize,
    resolve: Option<Resolve<'r>>,
    nesting: usize,
}

/// `_Expr`'s tokens: `0[xX][0-9a-fA-F']+[uUlL]*|0[bB][01']+[uUlL]*|\d[\d']*[uUlL]*|[A-Za-z_]\w*|<<|>>|\S`
fn tokenize(text: &[u8]) -> Vec<(usize, usize)> {
    let n = text.len();
    let mut toks = Vec::new();
    let mut p = 0;
    let suffix = |mut q: usize| {
        while q < n && matches!(text[q], b'u' | b'U' | b'l' | b'L') {
            q += 1;
        }
        q
    };
    while p < n {
        let c = text[p];
        if is_ws(c) {
            p += 1;
            continue;
        }
        let start = p;
        if c == b'0'
            && p + 2 < n
            && matches!(text[p + 1], b'x' | b'X')
            && (text[p + 2].is_ascii_hexdigit() || text[p + 2] == b'\'')
        {
            p += 2;
            while p < n && (text[p].is_ascii_hexdigit() || text[p] == b'\'') {
                p += 1;
            }
            p = suffix(p);
        } else if c == b'0'
            && p + 2 < n
            && matches!(text[p + 1], b'b' | b'B')
            && matches!(text[p + 2], b'0' | b'1' | b'\'')
        {
            p += 2;
            while p < n && matches!(text[p], b'0' | b'1' | b'\'') {
                p += 1;
            }
            p = suffix(p);
        } else if c.is_ascii_digit() {
            p += 1;
            while p < n && (text[p].is_ascii_digit() || text[p] == b'\'') {
                p += 1;
            }
            p = suffix(p);
        } else if is_ident_start(c) {
            p += 1;
            while p < n && is_w(text[p]) {
                p += 1;
            }
        } else if (c == b'<' || c == b'>') && p + 1 < n && text[p + 1] == c {
            p += 2;
        } else {
            p += 1;
        }
        toks.push((start, p));
    }
    toks
}

const LEVELS: [&[&[u8]]; 6] = [
    &[b"|"],
    &[b"^"],
    &[b"&"],
    &[b"<<", b">>"],
    &[b"+", b"-"],
    &[b"*"],
];

/// A literal token's value and type (C's literal types on LP64 Linux), or Err (Python's ValueError).
fn literal(tok: &[u8]) -> Result<Value, ()> {
    let mut end = tok.len();
    while end > 0 && matches!(tok[end - 1], b'u' | b'U' | b'l' | b'L') {
        end -= 1;
    }
    let (digits, suffix) = tok.split_at(end);
    let unsigned = suffix.iter().any(|&c| c == b'u' || c == b'U');
    let long = suffix.iter().any(|&c| c == b'l' || c == b'L');
    let (base, body): (u32, &[u8]) = if digits.len() >= 2 && matches!(digits[1], b'x' | b'X') {
        (16, &digits[2..])
    } else if digits.len() >= 2 && matches!(digits[1], b'b' | b'B') {
        (2, &digits[2..])
    } else {
        (10, digits)
    };
    // the value modulo 2**64, and whether it is 2**64 or more (Python's ints are unbounded)
    let mut low: u64 = 0;
    let mut big = false;
    let mut any = false;
    for &c in body {
        if c == b'\'' {
            continue;
        }
        let d = (c as char).to_digit(base).ok_or(())?;
        any = true;
        let (m, o1) = low.overflowing_mul(u64::from(base));
        let (s, o2) = m.overflowing_add(u64::from(d));
        big |= o1 || o2;
        low = s;
    }
    if !any {
        return Err(()); // int(b"", 16)
    }
    if !long && !big && low <= 0x7FFF_FFFF {
        return Ok((low, 32, !unsigned));
    }
    if !long && !big && low <= 0xFFFF_FFFF && (unsigned || base != 10) {
        return Ok((low, 32, false));
    }
    Ok((low, 64, !unsigned && !big && low <= 0x7FFF_FFFF_FFFF_FFFF))
}

impl<'a, 'r> Expr<'a, 'r> {
    fn new(text: &'a [u8], resolve: Option<Resolve<'r>>) -> Self {
        Expr {
            text,
            toks: tokenize(text),
            i: 0,
            resolve,
            nesting: 0,
        }
    }

    fn parse(mut self) -> Option<Value> {
        let value = self.level(0).ok()?;
        if self.i == self.toks.len() {
            Some(value)
        } else {
            None
        }
    }

    fn peek(&self) -> &'a [u8] {
        match self.toks.get(self.i) {
            Some(&(a, b)) => &self.text[a..b],
            None => b"",
        }
    }

    fn level(&mut self, k: usize) -> Result<Value, ()> {
        if k == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.level(k + 1)?;
        loop {
            let op = self.peek();
            if !LEVELS[k].contains(&op) {
                return Ok(left);
            }
            self.i += 1;
            let right = self.level(k + 1)?;
            let shift = op == b"<<" || op == b">>";
            let (width, signed) = if shift {
                (left.1, left.2)
            } else {
                let width = left.1.max(right.1);
                let signed = if left.1 == right.1 {
                    left.2 && right.2
                } else if left.1 > right.1 {
                    left.2
                } else {
                    right.2
                };
                (width, signed)
            };
            let a = convert(left, width, signed).0;
            let b = if shift {
                right.0
            } else {
                convert(right, width, signed).0
            };
            let v = match op {
                b"|" => a | b,
                b"^" => a ^ b,
                b"&" => a & b,
                // bits at or above `width` are masked off: a shift by `width` or more leaves none
                b"<<" => {
                    if b >= u64::from(width) || b >= 64 {
                        0
                    } else {
                        a << b
                    }
                }
                b">>" => {
                    if b >= 64 {
                        0
                    } else {
                        a >> b
                    }
                }
                b"+" => a.wrapping_add(b),
                b"-" => a.wrapping_sub(b),
                _ => a.wrapping_mul(b),
            };
            left = (v & width_mask(width), width, signed);
        }
    }

    fn unary(&mut self) -> Result<Value, ()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(());
        }
        let out = self.unary_inner();
        self.nesting -= 1;
        out
    }

    fn unary_inner(&mut self) -> Result<Value, ()> {
        let tok = self.peek();
        if tok == b"~" || tok == b"-" || tok == b"+" {
            self.i += 1;
            let (v, width, signed) = self.unary()?;
            let mask = width_mask(width);
            return Ok(match tok {
                b"~" => (!v & mask, width, signed),
                b"-" => (v.wrapping_neg() & mask, width, signed),
                _ => (v, width, signed),
            });
        }
        if tok == b"(" {
            self.i += 1;
            let inner = self.level(0)?;
            if self.peek() != b")" {
                return Err(());
            }
            self.i += 1;
            return Ok(inner);
        }
        if tok.first().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
            return literal(tok);
        }
        if tok.first().is_some_and(|&c| is_ident_start(c)) {
            if let Some(resolve) = self.resolve.as_mut() {
                if let Some(named) = resolve(tok) {
                    self.i += 1;
                    return Ok(named);
                }
            }
        }
        Err(())
    }
}

// -- parentheses, casts, constants -------------------------------------------------------------------------

fn strip_parens(text: &[u8]) -> &[u8] {
    let mut text = strip(text);
    while text.len() >= 2
        && text[0] == b'('
        && text[text.len() - 1] == b')'
        && balanced_inside(&text[1..text.len() - 1])
    {
        text = strip(&text[1..text.len() - 1]);
    }
    text
}

fn balanced_inside(text: &[u8]) -> bool {
    let mut depth: i64 = 0;
    for &c in text {
        if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth -= 1;
            if depth < 0 {
                return false;
            }
        }
    }
    depth == 0
}

fn of_value(value: Value) -> Class {
    let (v, width, _) = value;
    if width == 64 && v == u64::MAX {
        Class::Full64
    } else if v == 0xFFFF_FFFF {
        Class::Full32
    } else {
        Class::Partial
    }
}

fn cast_c() -> &'static Regex {
    static RX: OnceLock<Regex> = OnceLock::new();
    RX.get_or_init(|| Regex::new(r"(?-u)\A\(\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)\)").unwrap())
}

fn cast_cpp() -> &'static Regex {
    static RX: OnceLock<Regex> = OnceLock::new();
    RX.get_or_init(|| {
        Regex::new(r"(?-u)\Astatic_cast\s*<\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)>\s*\(").unwrap()
    })
}

/// `_CALL.match(text)`: `([A-Za-z_]\w*)\s*\(` at the start: (name end, match end).
fn call_match(text: &[u8]) -> Option<(usize, usize)> {
    if !text.first().is_some_and(|&c| is_ident_start(c)) {
        return None;
    }
    let mut i = 1;
    while i < text.len() && is_w(text[i]) {
        i += 1;
    }
    let name_end = i;
    while i < text.len() && is_ws(text[i]) {
        i += 1;
    }
    if i < text.len() && text[i] == b'(' {
        Some((name_end, i + 1))
    } else {
        None
    }
}

/// `text` without its leading casts, and the casts' types, outermost first (_casts).
fn casts(mut text: &[u8]) -> (&[u8], Vec<(u32, bool)>) {
    let mut out = Vec::new();
    if !text
        .first()
        .is_some_and(|&c| c == b'(' || is_ident_start(c))
    {
        return (text, out); // neither pattern can match
    }
    loop {
        if let Some(m) = cast_c().captures(text) {
            let end = m.get(0).unwrap().end();
            if end < text.len() {
                if let Some(spec) = int_type(m.get(1).unwrap().as_bytes()) {
                    out.push(spec);
                    text = strip_parens(&text[end..]);
                    continue;
                }
            }
        }
        let m = match cast_cpp().captures(text) {
            Some(m) => {
                let g = m.get(1).unwrap();
                Some((g.start(), g.end(), m.get(0).unwrap().end()))
            }
            None => call_match(text).map(|(name_end, end)| (0, name_end, end)),
        };
        if let Some((ga, gb, end)) = m {
            if text.ends_with(b")") && balanced_inside(&text[end..text.len() - 1]) {
                if let Some(spec) = int_type(&text[ga..gb]) {
                    out.push(spec);
                    text = strip_parens(&text[end - 1..]);
                    continue;
                }
            }
        }
        return (text, out);
    }
}

/// The value of an integer constant expression (casts included; names through `resolve`), or None (constant).
pub fn constant(text: &[u8], resolve: Option<Resolve<'_>>) -> Option<Value> {
    let (inner, casts) = casts(strip_parens(text));
    let mut value = Expr::new(inner, resolve).parse()?;
    for &(width, signed) in casts.iter().rev() {
        value = convert(value, width, signed);
    }
    Some(value)
}

/// The last of `text`'s top-level comma-separated parts (_top_level_parts(text)[-1]), or None when `text`
/// has no top-level comma.
fn last_top_level_part(text: &[u8]) -> Option<&[u8]> {
    let mut depth: i64 = 0;
    let mut start = None;
    for (i, &c) in text.iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => start = Some(i + 1),
            _ => {}
        }
    }
    start.map(|s| &text[s..])
}

fn numeric_cast() -> &'static Regex {
    static RX: OnceLock<Regex> = OnceLock::new();
    RX.get_or_init(|| {
        Regex::new(r"(?-u)\A(?:static_cast\s*<[\w\s:]+>|\(\s*[\w\s:]+\))?[\s()~+\-*|&^<>0-9a-fA-FxXuUlL']+\z").unwrap()
    })
}

/// `_NUMERIC.fullmatch(text)`
fn numeric(text: &[u8]) -> bool {
    !text.is_empty()
        && text.iter().all(|&c| {
            is_ws(c)
                || matches!(
                    c,
                    b'(' | b')'
                        | b'~'
                        | b'+'
                        | b'-'
                        | b'*'
                        | b'|'
                        | b'&'
                        | b'^'
                        | b'<'
                        | b'>'
                        | b'\''
                )
                || c.is_ascii_hexdigit()
                || matches!(c, b'x' | b'X' | b'u' | b'U' | b'l' | b'L')
        })
}

/// `_literal_mask`: `classify` of a mask made of literals only.
fn literal_mask(text: &[u8]) -> Option<Mask> {
    if text == b"__activemask()" || numeric_cast().is_match(text) {
        classify_literal(text)
    } else {
        None
    }
}

/// masks.py's classify_literal.
pub fn classify_literal(text: &[u8]) -> Option<Mask> {
    let Some(value) = constant(text, None) else {
        return (text == b"__activemask()")
            .then(|| Mask::new(Class::Active, b"__activemask()".to_vec()));
    };
    let shown = ws_collapse(strip_parens(text));
    let cls = of_value(value);
    let how = if cls == Class::Partial {
        cat(&[&shown, b" = ", &hex(value.0)])
    } else {
        shown
    };
    Some(Mask::new(cls, how))
}

/// The class of `mask` (the argument's text) of a call at `call_start` of the file `data` (classify).
pub fn classify(data: &[u8], call_start: usize, mask: &[u8], known: &Known) -> Mask {
    classify_at(data, call_start, mask, known, 0)
}

fn classify_at(data: &[u8], call_start: usize, mut mask: &[u8], known: &Known, depth: u32) -> Mask {
    let text = loop {
        if depth == 0 && mask.len() < 64 {
            if let Some(hit) = literal_mask(mask) {
                return hit;
            }
        }
        let text = strip_parens(mask);
        match last_top_level_part(text) {
            // a comma expression: its value is the last operand's ("((void)m, __activemask())")
            Some(last) => mask = last,
            None => break text,
        }
    };
    let shown = ws_collapse(text);
    let mut hows: Vec<Vec<u8>> = Vec::new();
    let value = {
        let mut resolve = |name: &[u8]| {
            let (how, value) = value_of(data, call_start, name, known, depth + 1)?;
            hows.push(how);
            Some(value)
        };
        constant(text, Some(&mut resolve))
    };
    if let Some(value) = value {
        let cls = of_value(value);
        let how = if hows.is_empty() {
            shown
        } else {
            cat(&[&shown, b" (", &hows.join(&b"; "[..]), b")"])
        };
        let how = if cls == Class::Partial {
            cat(&[&how, b" = ", &hex(value.0)])
        } else {
            how
        };
        return Mask::new(cls, how);
    }
    let (inner, casts) = casts(text);
    let width = casts.first().map(|c| c.0);
    if let Some((name_end, end)) = call_match(inner) {
        if inner.ends_with(b")") && balanced_inside(&inner[end..inner.len() - 1]) {
            let name = &inner[..name_end];
            if name == b"__activemask" {
                return Mask::new(
                    if width == Some(32) {
                        Class::Active32
                    } else {
                        Class::Active
                    },
                    shown,
                );
            }
            if MASK64_CALLS.contains(&name) && width != Some(32) {
                return Mask::new(Class::Wide, shown);
            }
            return Mask::new(Class::Runtime, cat(&[&shown, b" is computed at run time"]));
        }
    }
    if ident_match(inner) && depth < 4 {
        let mut a = 0;
        while a < inner.len() && matches!(inner[a], b':' | b' ' | b'\t') {
            a += 1;
        }
        let found = named(data, call_start, &inner[a..], &shown, known, depth);
        if found.unresolved.is_some() {
            return found;
        }
        if width == Some(32) && matches!(found.cls, Class::Active | Class::Full64 | Class::Wide) {
            let cls = if found.cls == Class::Active {
                Class::Active32
            } else {
                Class::Runtime
            };
            return Mask::new(cls, cat(&[&shown, b": a 32-bit cast of ", &found.how]));
        }
        return found;
    }
    Mask::new(Class::Runtime, cat(&[&shown, b" is computed at run time"]))
}

/// `_IDENT.match(text)`: `(?:::\s*)?[A-Za-z_]\w*\Z`
fn ident_match(text: &[u8]) -> bool {
    let mut i = 0;
    if text.starts_with(b"::") {
        i = 2;
        while i < text.len() && is_ws(text[i]) {
            i += 1;
        }
    }
    i < text.len() && is_ident_start(text[i]) && text[i + 1..].iter().all(|&c| is_w(c))
}

/// The last `^[ \t]*#[ \t]*define[ \t]+NAME[ \t]+([^\r\n]*)` (re.M) in `data[:limit]`: group 1's span.
fn last_define(data: &[u8], limit: usize, name: &[u8]) -> Option<(usize, usize)> {
    let hay = &data[..limit.min(data.len())];
    let n = hay.len();
    for d in memchr::memmem::rfind_iter(hay, b"define") {
        // the line start, '#', blanks before "define"
        let mut k = d;
        while k > 0 && is_blank(hay[k - 1]) {
            k -= 1;
        }
        if k == 0 || hay[k - 1] != b'#' {
            continue;
        }
        k -= 1;
        while k > 0 && is_blank(hay[k - 1]) {
            k -= 1;
        }
        if k > 0 && hay[k - 1] != b'\n' {
            continue;
        }
        let mut p = d + 6;
        if p >= n || !is_blank(hay[p]) {
            continue;
        }
        while p < n && is_blank(hay[p]) {
            p += 1;
        }
        if !hay[p..].starts_with(name) {
            continue;
        }
        p += name.len();
        if p >= n || !is_blank(hay[p]) {
            continue;
        }
        while p < n && is_blank(hay[p]) {
            p += 1;
        }
        let mut e = p;
        while e < n && hay[e] != b'\r' && hay[e] != b'\n' {
            e += 1;
        }
        return Some((p, e));
    }
    None
}

/// `group.split(b"//")[0].split(b"/*")[0].strip()`
fn define_body(group: &[u8]) -> &[u8] {
    let mut body = group;
    if let Some(i) = memchr::memmem::find(body, b"//") {
        body = &body[..i];
    }
    if let Some(i) = memchr::memmem::find(body, b"/*") {
        body = &body[..i];
    }
    strip(body)
}

/// The constant value of `name` at `call_start`, with how it is defined (value_of).
pub fn value_of(
    data: &[u8],
    call_start: usize,
    name: &[u8],
    known: &Known,
    depth: u32,
) -> Option<(Vec<u8>, Value)> {
    if depth > 4 {
        return None;
    }
    let mut resolve =
        |inner: &[u8]| value_of(data, call_start, inner, known, depth + 1).map(|f| f.1);
    if let Some((a, b)) = last_define(data, call_start, name) {
        let body = define_body(&data[a..b]);
        let value = if !body.is_empty() && !body.ends_with(b"\\") {
            constant(body, Some(&mut resolve))
        } else {
            None
        };
        let value = value?;
        return Some((cat(&[b"#define ", name, b" ", &ws_collapse(body)]), value));
    }
    let dname = declaration_name(name);
    if let Some(decl) = declaration(data, call_start, &dname) {
        let spec = int_type(decl.words(data))?;
        let norm = norm_type(decl.words(data));
        if !(decl.after == b'=' || decl.after == b'{') || is_parameter(data, &decl) {
            return None;
        }
        let konst = norm
            .split(|&c| c == b' ')
            .any(|t| t == b"const" || t == b"constexpr");
        if !konst && assigned(py_slice(data, decl.end, call_start), name) {
            return None;
        }
        let init = initializer(data, decl.end);
        let value = constant(init, Some(&mut resolve))?;
        let how = cat(&[&norm, b" ", name, b" = ", &ws_collapse(strip_parens(init))]);
        return Some((how, convert(value, spec.0, spec.1)));
    }
    let (how, value) = known.get(name)?;
    Some((cat(&[how, b", in a project header"]), *value))
}

/// `re.sub(rb"\\(.)", rb"\1", re.escape(name))`: the name `_declaration` looks for (a newline stays escaped).
fn declaration_name(name: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !name.contains(&b'\n') {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = Vec::with_capacity(name.len() + 4);
    for &c in name {
        if c == b'\n' {
            out.push(b'\\');
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// A declaration found by `declaration` (_Decl): type words `data[start..name]`, what follows the name.
struct Decl {
    start: usize,
    name: usize,
    after: u8,
    end: usize,
}

impl Decl {
    fn words<'d>(&self, data: &'d [u8]) -> &'d [u8] {
        &data[self.start..self.name]
    }
}

const NOT_TYPES: [&[u8]; 11] = [
    b"return",
    b"case",
    b"else",
    b"goto",
    b"throw",
    b"sizeof",
    b"new",
    b"delete",
    b"co_return",
    b"co_yield",
    b"do",
];

/// `_TYPE_WORDS.match(words)`: `[ \t]*(?:[A-Za-z_][\w:]*[ \t]+)+\Z`
fn type_words(words: &[u8]) -> bool {
    let n = words.len();
    let mut i = 0;
    while i < n && is_blank(words[i]) {
        i += 1;
    }
    if i == n {
        return false;
    }
    while i < n {
        if !is_ident_start(words[i]) {
            return false;
        }
        i += 1;
        while i < n && (is_w(words[i]) || words[i] == b':') {
            i += 1;
        }
        if i == n || !is_blank(words[i]) {
            return false;
        }
        while i < n && is_blank(words[i]) {
            i += 1;
        }
    }
    true
}

/// The nearest declaration of `name` before `call_start` (_declaration).
fn declaration(data: &[u8], call_start: usize, name: &[u8]) -> Option<Decl> {
    let n = name.len();
    let limit = call_start.min(data.len());
    if n == 0 || n > limit {
        return None;
    }
    let hay = &data[..limit];
    let mut decl = None;
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&hay[from..], name) {
        let i = from + off;
        let end = i + n;
        from = end;
        if (i > 0 && is_idc(data[i - 1])) || (end < data.len() && is_idc(data[end])) {
            continue;
        }
        // _AFTER_NAME: \s*(=|\{|;|,|\))
        let mut q = end;
        while q < data.len() && is_ws(data[q]) {
            q += 1;
        }
        if q >= data.len() || !matches!(data[q], b'=' | b'{' | b';' | b',' | b')') {
            continue;
        }
        let after = data[q];
        let floor = i.saturating_sub(256);
        let mut lo = 0;
        let mut k = i;
        while k > floor {
            k -= 1;
            if matches!(data[k], b'\n' | b';' | b'{' | b'}' | b'(' | b',') {
                lo = k + 1;
                break;
            }
        }
        if lo == 0 && i > 256 {
            lo = i - 256;
        }
        let words = &data[lo..i];
        if type_words(words)
            && (int_type(words).is_some()
                || ((after == b'=' || after == b'{')
                    && !words_of(words).any(|w| NOT_TYPES.contains(&w))))
        {
            decl = Some(Decl {
                start: lo,
                name: i,
                after,
                end: q + 1,
            });
        }
    }
    decl
}

/// Whether the declaration follows `(` or `,` of a parameter list (_is_parameter).
fn is_parameter(data: &[u8], decl: &Decl) -> bool {
    if decl.start == 0 {
        return false;
    }
    let opener = data[decl.start - 1];
    if opener == b',' {
        return true;
    }
    if opener != b'(' {
        return false;
    }
    let before = rstrip(&data[decl.start.saturating_sub(64)..decl.start - 1]);
    ![&b"for"[..], b"if", b"while", b"switch"]
        .iter()
        .any(|k| before.ends_with(k))
}

/// Whether `name` is assigned (`=`, `op=`, `++`, `--`) in `rest` (_assigned).
fn assigned(rest: &[u8], name: &[u8]) -> bool {
    let n = name.len();
    if n == 0 || n > rest.len() {
        return false;
    }
    let last_w = name.last().is_some_and(|&c| is_w(c));
    let mut from = 0;
    while let Some(off) = memchr::memmem::find(&rest[from..], name) {
        let p = from + off;
        from = p + 1;
        let end = p + n;
        let mut q = end;
        while q < rest.len() && is_ws(rest[q]) {
            q += 1;
        }
        // (?<![\w.>])NAME\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)   and   (?<![\w.>])NAME\s*(?:\+\+|--)
        let free = p == 0 || !(is_w(rest[p - 1]) || rest[p - 1] == b'.' || rest[p - 1] == b'>');
        if free {
            let mut r = q;
            if r < rest.len()
                && matches!(
                    rest[r],
                    b'-' | b'+' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^'
                )
            {
                r += 1;
            } else if rest[r.min(rest.len())..].starts_with(b"<<")
                || rest[r.min(rest.len())..].starts_with(b">>")
            {
                r += 2;
            }
            if r < rest.len() && rest[r] == b'=' && rest.get(r + 1) != Some(&b'=') {
                return true;
            }
            if q < rest.len() && rest[q] == b'=' && rest.get(q + 1) != Some(&b'=') {
                return true;
            }
            if rest[q..].starts_with(b"++") || rest[q..].starts_with(b"--") {
                return true;
            }
        }
        // (?:\+\+|--)\s*NAME\b
        let boundary = last_w != (end < rest.len() && is_w(rest[end]));
        if boundary {
            let mut s = p;
            while s > 0 && is_ws(rest[s - 1]) {
                s -= 1;
            }
            if s >= 2 && (&rest[s - 2..s] == b"++" || &rest[s - 2..s] == b"--") {
                return true;
            }
        }
    }
    false
}

/// A mask given by a name that is not a constant: its #define, or its declaration before the call (_named).
fn named(
    data: &[u8],
    call_start: usize,
    name: &[u8],
    shown: &[u8],
    known: &Known,
    depth: u32,
) -> Mask {
    if let Some((a, b)) = last_define(data, call_start, name) {
        let body = define_body(&data[a..b]);
        if !body.is_empty() && !body.ends_with(b"\\") {
            let inner = classify_at(data, call_start, body, known, depth + 1);
            return Mask::new(
                inner.cls,
                cat(&[shown, b" (#define ", shown, b" ", &ws_collapse(body), b")"]),
            );
        }
    }
    let dname = declaration_name(name);
    let Some(decl) = declaration(data, call_start, &dname) else {
        if let Some((how, value)) = known.get(name) {
            return Mask::new(
                of_value(*value),
                cat(&[shown, b" (", how, b", in a project header)"]),
            );
        }
        return Mask {
            cls: Class::Runtime,
            how: cat(&[
                shown,
                b" is defined neither in this file nor as a constant in a project header",
            ]),
            unresolved: Some(name.to_vec()),
        };
    };
    let words = decl.words(data);
    let spec = int_type(words);
    let norm = norm_type(words);
    let has = |t: &[u8]| norm.split(|&c| c == b' ').any(|w| w == t);
    let konst = has(b"const") || has(b"constexpr");
    let auto = has(b"auto");
    let width = spec.map(|s| s.0);
    if is_parameter(data, &decl) {
        return typed_runtime(
            shown,
            width,
            b"a function parameter (its callers' values are not known here)",
        );
    }
    if matches!(decl.after, b';' | b',' | b')') {
        return typed_runtime(
            shown,
            width,
            b"declared without a value and assigned at run time",
        );
    }
    let init = initializer(data, decl.end);
    if !konst && assigned(py_slice(data, decl.end, call_start), name) {
        return typed_runtime(shown, width, b"assigned again before the call");
    }
    let decl_text = cat(&[&norm, b" ", shown, b" = ", &ws_collapse(strip_parens(init))]);
    let inner = classify_at(data, call_start, init, known, depth + 1);
    match inner.cls {
        Class::Active => {
            if width == Some(32) {
                Mask::new(Class::Active32, decl_text)
            } else if width == Some(64) || auto {
                Mask::new(Class::Active, decl_text)
            } else {
                Mask::new(
                    Class::Runtime,
                    cat(&[&decl_text, b": a type of unknown width"]),
                )
            }
        }
        Class::Full32 | Class::Full64 | Class::Partial | Class::Active32 => {
            let cls = if inner.cls == Class::Full64 && width == Some(32) {
                Class::Full32
            } else {
                inner.cls
            };
            Mask::new(cls, decl_text)
        }
        Class::Wide => {
            if width == Some(32) {
                Mask::new(
                    Class::Runtime,
                    cat(&[&decl_text, b": a 64-bit lane mask kept in 32 bits"]),
                )
            } else {
                Mask::new(
                    if width == Some(64) || auto {
                        Class::Wide
                    } else {
                        Class::Runtime
                    },
                    decl_text,
                )
            }
        }
        Class::Runtime => {
            typed_runtime(shown, width, &cat(&[&decl_text, b", computed at run time"]))
        }
    }
}

fn typed_runtime(shown: &[u8], width: Option<u32>, why: &[u8]) -> Mask {
    Mask::new(
        if width == Some(64) {
            Class::Wide
        } else {
            Class::Runtime
        },
        cat(&[shown, b" is ", why]),
    )
}

/// The initializer after `=`/`{` at `at` (_initializer).
fn initializer(data: &[u8], at: usize) -> &[u8] {
    let mut depth: i64 = 0;
    let mut i = at;
    let n = data.len();
    while i < n {
        match data[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            b';' | b',' if depth == 0 => break,
            _ => {}
        }
        i += 1;
    }
    py_slice(data, at, i)
}

/// For a name ending at `end`: the span of its call's first argument, stripped of blanks, or None when the
/// name is not called with arguments (first_argument).
pub fn first_argument(data: &[u8], end: usize) -> Option<(usize, usize)> {
    let n = data.len();
    let mut i = end;
    while i < n && matches!(data[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    if i >= n || data[i] != b'(' {
        return None;
    }
    let mut depth: i64 = 0;
    let mut j = i + 1;
    while j < n {
        let c = data[j];
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            b',' if depth == 0 => break,
            b'"' | b'\'' => {
                let mut k = j + 1;
                while k < n && data[k] != c && data[k] != b'\n' {
                    k += if data[k] == b'\\' { 2 } else { 1 };
                }
                j = k;
            }
            b';' => return None,
            _ => {}
        }
        j += 1;
    }
    if j >= n {
        return None;
    }
    let (mut a, mut b) = (i + 1, j);
    while a < b && matches!(data[a], b' ' | b'\t' | b'\r' | b'\n') {
        a += 1;
    }
    while b > a && matches!(data[b - 1], b' ' | b'\t' | b'\r' | b'\n') {
        b -= 1;
    }
    (a < b).then_some((a, b))
}

/// Whether `text` is one identifier (is_name).
pub fn is_name(text: &[u8]) -> bool {
    let t = strip(text);
    !t.is_empty() && is_ident_start(t[0]) && t[1..].iter().all(|&c| is_w(c))
}

// -- the project's headers ---------------------------------------------------------------------------------

/// One header's constants among the wanted names, in Python's dict order: name -> (how, value).
pub type HeaderTable = Vec<(Vec<u8>, (Vec<u8>, Value))>;

fn header_define() -> &'static Regex {
    static RX: OnceLock<Regex> = OnceLock::new();
    RX.get_or_init(|| {
        Regex::new(r"(?m-u)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\r\n]+)\r?$").unwrap()
    })
}

fn header_const() -> &'static Regex {
    static RX: OnceLock<Regex> = OnceLock::new();
    RX.get_or_init(|| {
        Regex::new(concat!(
            r"(?m-u)^[ \t]*((?:(?:static|inline|__device__|__constant__|__host__)[ \t]+)*(?:constexpr|const)[ \t]+",
            r"[^=;(){}\n]*?)[ \t]+([A-Za-z_]\w*)[ \t]*=[ \t]*([^;\n]+);"
        ))
        .unwrap()
    })
}

fn table_set(out: &mut HeaderTable, name: &[u8], entry: (Vec<u8>, Value)) {
    match out.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = entry,
        None => out.push((name.to_vec(), entry)),
    }
}

/// The integer constants among `wanted` a header defines (header_masks).
pub fn header_masks(data: &[u8], wanted: &HashSet<Vec<u8>>) -> HeaderTable {
    let mut out = HeaderTable::new();
    if !wanted
        .iter()
        .any(|name| memchr::memmem::find(data, name).is_some())
    {
        return out;
    }
    if memchr::memmem::find(data, b"define").is_some() {
        for m in header_define().captures_iter(data) {
            let name = m.get(1).unwrap().as_bytes();
            if !wanted.contains(name) {
                continue;
            }
            let body = define_body(m.get(2).unwrap().as_bytes());
            let value = if !body.is_empty() && numeric(body) {
                constant(body, None)
            } else {
                None
            };
            if let Some(value) = value {
                table_set(
                    &mut out,
                    name,
                    (cat(&[b"#define ", name, b" ", body]), value),
                );
            }
        }
    }
    if memchr::memmem::find(data, b"const").is_some() {
        for m in header_const().captures_iter(data) {
            let name = m.get(2).unwrap().as_bytes();
            if !wanted.contains(name) {
                continue;
            }
            let words = m.get(1).unwrap().as_bytes();
            let Some(spec) = int_type(words) else {
                continue;
            };
            let init = strip(m.get(3).unwrap().as_bytes());
            let value = if numeric_cast().is_match(init) {
                constant(init, None)
            } else {
                None
            };
            if let Some(value) = value {
                let how = cat(&[&norm_type(words), b" ", name, b" = ", &ws_collapse(init)]);
                table_set(&mut out, name, (how, convert(value, spec.0, spec.1)));
            }
        }
    }
    out
}

/// One table for the project, sorted; a name defined with different values is left out (merge_header_masks).
pub fn merge_header_masks<'t>(tables: impl IntoIterator<Item = &'t HeaderTable>) -> ProjectMasks {
    let mut merged: HashMap<&[u8], (&[u8], Value)> = HashMap::new();
    let mut conflicting: HashSet<&[u8]> = HashSet::new();
    for table in tables {
        for (name, (how, value)) in table {
            match merged.get(name.as_slice()) {
                Some(old) => {
                    if old.1 != *value {
                        conflicting.insert(name.as_slice());
                    }
                }
                None => {
                    merged.insert(name.as_slice(), (how.as_slice(), *value));
                }
            }
        }
    }
    let mut out: ProjectMasks = merged
        .into_iter()
        .filter(|(name, _)| !conflicting.contains(name))
        .map(|(name, (how, (value, width, signed)))| ProjectMask {
            name: name.to_vec(),
            how: how.to_vec(),
            value,
            width,
            signed,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        let k = Known::default();
        assert_eq!(classify(b"", 0, b"0xffffffff", &k).cls, Class::Full32);
        assert_eq!(classify(b"", 0, b"~0ull", &k).cls, Class::Full64);
        assert_eq!(classify(b"", 0, b"__activemask()", &k).cls, Class::Active);
        let m = classify(b"", 0, b"0xff", &k);
        assert_eq!(
            (m.cls, m.how.as_slice()),
            (Class::Partial, &b"0xff = 0xff"[..])
        );
        assert_eq!(classify(b"", 0, b"(uint64_t)~0u", &k).cls, Class::Full32);
    }

    #[test]
    fn names() {
        let k = Known::default();
        let data = b"#define FULL 0xffffffffu\nvoid f(){ x = __shfl_sync(FULL, v, 1); }";
        let at = data.windows(11).position(|w| w == b"__shfl_sync").unwrap();
        let m = classify(data, at, b"FULL", &k);
        assert_eq!(m.cls, Class::Full32);
        assert_eq!(m.how, b"FULL (#define FULL 0xffffffffu)".to_vec());
        let m = classify(data, at, b"OTHER", &k);
        assert_eq!(m.unresolved.as_deref(), Some(&b"OTHER"[..]));
    }
}
