//! Token recognisers for the hipify scanner, each equal to one alternative of the reference regex in
//! tools/hipify/translate.py (`_build_scanner_source`, compiled with `re.S`). Each takes the input and
//! the offset of the token's first byte and returns the offset just past the token (or `None` where the
//! regex alternative does not match there). The differential tests in tests/hipify/test_native.py hold
//! the two engines to the same output.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Bytes that continue an identifier; bytes >= 0x80 count, so a name glued to UTF-8 is never split.
pub const IDC: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    t
};

/// `\` followed by something: how many bytes the escape takes (`\` CR LF is one unit), or `None` at the
/// end of the input (the regex's `\\(?:\r\n|.)` then fails and the token ends before the backslash).
#[inline]
fn escape_len(data: &[u8], at: usize) -> Option<usize> {
    if at + 1 >= data.len() {
        None
    } else if data[at + 1] == b'\r' && data.get(at + 2) == Some(&b'\n') {
        Some(3)
    } else {
        Some(2)
    }
}

/// `//...` (at = offset of the first `/`, data[at + 1] == `/`): to the end of the line; a backslash
/// continues it onto the next line.
pub fn line_comment_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 2;
    while j < data.len() {
        match data[j] {
            b'\n' => break,
            b'\\' => match escape_len(data, j) {
                Some(k) => j += k,
                None => break,
            },
            _ => j += 1,
        }
    }
    j
}

/// `/*...*/` (data[at + 1] == `*`): through the first `*/` after the opening `/*`; unterminated, to the
/// end of the input.
pub fn block_comment_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 2;
    while j + 1 < data.len() {
        if data[j] == b'*' && data[j + 1] == b'/' {
            return j + 2;
        }
        j += 1;
    }
    data.len()
}

/// `"..."` (data[at] == `"`): through the closing quote; an unterminated string stops before the newline.
pub fn string_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 1;
    while j < data.len() {
        match data[j] {
            b'"' => return j + 1,
            b'\n' => return j,
            b'\\' => match escape_len(data, j) {
                Some(k) => j += k,
                None => return j,
            },
            _ => j += 1,
        }
    }
    j
}

/// `'...'` (data[at] == `'`): as a string, but an escape is exactly one byte after the backslash.
pub fn char_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 1;
    while j < data.len() {
        match data[j] {
            b'\'' => return j + 1,
            b'\n' => return j,
            b'\\' => {
                if j + 1 >= data.len() {
                    return j;
                }
                j += 2;
            }
            _ => j += 1,
        }
    }
    j
}

/// `R"delim(...)delim"` (data[at] == `R`, data[at + 1] == `"`): the end of the raw string, or `None` when
/// the delimiter is not followed by `(` (longer than 16 bytes, or a forbidden byte) or never closes.
pub fn raw_string_end(data: &[u8], at: usize) -> Option<usize> {
    let delim_start = at + 2;
    let mut k = delim_start;
    while k < data.len() && k - delim_start <= 16 && !b"()\\ \t\r\n\"".contains(&data[k]) {
        k += 1;
    }
    if k - delim_start > 16 || data.get(k) != Some(&b'(') {
        return None;
    }
    let delim = &data[delim_start..k];
    let mut j = k + 1;
    while j < data.len() {
        if data[j] == b')'
            && data[j + 1..].starts_with(delim)
            && data.get(j + 1 + delim.len()) == Some(&b'"')
        {
            return Some(j + 2 + delim.len());
        }
        j += 1;
    }
    None
}

/// An `#include` / `#include_next` directive at `at` (data[at] == `#`): (path start, path end, angled,
/// directive end), as `#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\r\n]*)[>"]`.
pub fn include_at(data: &[u8], at: usize) -> Option<(usize, usize, bool, usize)> {
    let blank = |j: &mut usize| {
        while *j < data.len() && (data[*j] == b' ' || data[*j] == b'\t') {
            *j += 1;
        }
    };
    let mut j = at + 1;
    blank(&mut j);
    if !data[j..].starts_with(b"include") {
        return None;
    }
    j += 7;
    if data[j..].starts_with(b"_next") {
        j += 5;
    }
    blank(&mut j);
    let open = *data.get(j)?;
    if open != b'<' && open != b'"' {
        return None;
    }
    let pstart = j + 1;
    let mut k = pstart;
    while k < data.len() && !b">\"\r\n".contains(&data[k]) {
        k += 1;
    }
    match data.get(k) {
        Some(b'>') | Some(b'"') => Some((pstart, k, open == b'<', k + 1)),
        _ => None,
    }
}

/// Whether only white space (`strip(b" \t\r\f\v")`) precedes `at` on its line.
pub fn at_line_start(data: &[u8], at: usize) -> bool {
    let line_start = data[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    data[line_start..at]
        .iter()
        .all(|b| b" \t\r\x0c\x0b".contains(b))
}

/// Start of the run of identifier bytes that ends at `end`.
pub fn token_start(data: &[u8], end: usize) -> usize {
    let mut i = end;
    while i > 0 && IDC[data[i - 1] as usize] {
        i -= 1;
    }
    i
}

/// The scanner's prefixes: an identifier is a candidate name when it starts with one of them (the reference
/// regex's identifier alternatives are `prefix[IDC]*`).
pub struct Prefixes {
    /// two-byte prefixes every stop-worthy name starts with (`cu`, `__`, ...), indexed by the two bytes
    short: Vec<bool>,
    /// other prefixes (whole names), by their first two bytes: an identifier is compared with the few that
    /// share its first two bytes (the database has ~100 whole names, most of them `fftw_*`/`FFTW_*`)
    long: HashMap<u16, Vec<Vec<u8>>, BuildHasherDefault<Fx>>,
    /// the first two bytes of the long prefixes, indexed by the two bytes
    long_two: Vec<bool>,
    /// one-byte prefixes (tools/hipify gives none; kept so any prefix list means what it says)
    single: [bool; 256],
    /// first bytes of any prefix: most identifiers are rejected by one lookup
    first: [bool; 256],
}

impl Prefixes {
    /// `None` when a prefix is empty.
    pub fn new<I: IntoIterator<Item = Vec<u8>>>(prefixes: I) -> Option<Self> {
        let mut short = vec![false; 1 << 16];
        let mut long: HashMap<u16, Vec<Vec<u8>>, BuildHasherDefault<Fx>> = HashMap::default();
        let mut long_two = vec![false; 1 << 16];
        let mut single = [false; 256];
        let mut first = [false; 256];
        for p in prefixes {
            match p.len() {
                0 => return None,
                1 => single[p[0] as usize] = true,
                2 => short[usize::from(p[0]) << 8 | usize::from(p[1])] = true,
                _ => {
                    let k = usize::from(p[0]) << 8 | usize::from(p[1]);
                    long_two[k] = true;
                    long.entry(k as u16).or_default().push(p);
                }
            }
        }
        for (b, f) in first.iter_mut().enumerate() {
            *f = single[b]
                || short[b << 8..(b + 1) << 8].iter().any(|&x| x)
                || long_two[b << 8..(b + 1) << 8].iter().any(|&x| x);
        }
        Some(Prefixes {
            short,
            long,
            long_two,
            single,
            first,
        })
    }

    #[inline]
    pub fn is_candidate(&self, name: &[u8]) -> bool {
        let b0 = name[0];
        if !self.first[b0 as usize] {
            return false;
        }
        if name.len() >= 2 {
            let k = usize::from(b0) << 8 | usize::from(name[1]);
            if self.short[k] {
                return true;
            }
            if self.long_two[k] && self.long[&(k as u16)].iter().any(|p| name.starts_with(p)) {
                return true;
            }
        }
        self.single[b0 as usize]
    }

    /// Whether the reference scanner, visiting the run `data[s..e]` byte by byte, would match an
    /// identifier (consuming the run) before reaching its last byte.
    fn candidate_before_last(&self, data: &[u8], s: usize, e: usize) -> bool {
        (s..e.saturating_sub(1)).any(|p| self.is_candidate(&data[p..e]))
    }
}

/// FxHash (rustc's): names are short and not attacker-chosen, and SipHash would be a third of the loop.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        self.0 = h;
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map with Fx hashing.
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// The output of one file's scan, built as it goes: the bytes before `pos` are emitted (into `out`,
/// which stays empty until the first edit), plus the spans of comments and literals and the launches.
pub struct Walk<'a> {
    pub data: &'a [u8],
    pub out: Vec<u8>,
    pub pos: usize,
    /// tokens before this input offset are ignored (a rewritten call's consumed arguments)
    pub skip_until: usize,
    /// comments and literals of the input
    pub spans: Vec<(usize, usize)>,
    /// (output offset, input offset) of each `<<<`
    pub launches: Vec<(usize, usize)>,
}

impl<'a> Walk<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Walk {
            data,
            out: Vec::new(),
            pos: 0,
            skip_until: 0,
            spans: Vec::new(),
            launches: Vec::new(),
        }
    }

    /// Put `text` in place of `data[start..end]` (`start >= pos`).
    #[inline]
    pub fn replace(&mut self, start: usize, end: usize, text: &[u8]) {
        self.replace_parts(start, end, &[text]);
    }

    /// Put the concatenation of `parts` in place of `data[start..end]` (`start >= pos`).
    #[inline]
    pub fn replace_parts(&mut self, start: usize, end: usize, parts: &[&[u8]]) {
        if self.out.capacity() == 0 {
            self.out.reserve(self.data.len() + self.data.len() / 8 + 64);
        }
        if start > self.pos {
            self.out.extend_from_slice(&self.data[self.pos..start]);
        }
        for p in parts {
            self.out.extend_from_slice(p);
        }
        self.pos = end;
    }

    /// Output offset of input offset `at` (>= pos): what is emitted once everything before it is.
    #[inline]
    pub fn out_offset(&self, at: usize) -> usize {
        (self.out.len() + at).saturating_sub(self.pos)
    }

    /// The output (None when nothing changed).
    pub fn output(&mut self) -> Option<Vec<u8>> {
        if self.pos == 0 {
            None
        } else {
            let mut out = std::mem::take(&mut self.out);
            out.extend_from_slice(&self.data[self.pos..]);
            Some(out)
        }
    }
}

/// What the scan asks at the tokens it does not handle itself (the reference's decisions): implemented
/// by the Python-callback scanner (lib.rs) and by the native translator (engine/translate.rs).
pub trait Decider {
    type Error;
    /// A candidate identifier `data[s..e]` (not in skipped input, not starting with a digit): edit through
    /// `w` (`w.skip_until` may be raised past consumed arguments).
    fn name(&mut self, w: &mut Walk<'_>, s: usize, e: usize) -> Result<(), Self::Error>;
    /// An `#include` at `at` (at a line's start, not skipped), its path `data[pstart..pend]`.
    fn include(
        &mut self,
        w: &mut Walk<'_>,
        at: usize,
        pstart: usize,
        pend: usize,
        angled: bool,
    ) -> Result<(), Self::Error>;
    /// A comment or literal `data[start..end]` (from its quote, or the `R` of a raw string) to translate
    /// (only with the comments-and-strings option).
    fn text(&mut self, w: &mut Walk<'_>, start: usize, end: usize) -> Result<(), Self::Error>;
}

/// One file's scan, exactly as the reference regex scanner walks it (translate.py `_translate`): every
/// token's span and the launches are recorded in the returned `Walk`, names, includes and (with
/// `literals`) comments and literals go to `d`.
#[inline]
pub fn walk<'a, D: Decider>(
    prefixes: &Prefixes,
    launch: bool,
    literals: bool,
    data: &'a [u8],
    d: &mut D,
) -> Result<Walk<'a>, D::Error> {
    let n = data.len();
    let mut w = Walk::new(data);
    let mut i = 0usize;
    while i < n {
        let c = data[i];
        if IDC[c as usize] {
            let s = i;
            let mut e = i + 1;
            while e < n && IDC[data[e] as usize] {
                e += 1;
            }
            if data[e - 1] == b'R'
                && e < n
                && data[e] == b'"'
                && !prefixes.candidate_before_last(data, s, e)
            {
                if let Some(end) = raw_string_end(data, e - 1) {
                    literal(&mut w, d, literals, e - 1, s, end, true)?;
                    i = end;
                    continue;
                }
            }
            i = e;
            if s < w.skip_until || c.is_ascii_digit() || !prefixes.is_candidate(&data[s..e]) {
                continue;
            }
            d.name(&mut w, s, e)?;
            continue;
        }
        match c {
            b'/' if i + 1 < n && (data[i + 1] == b'/' || data[i + 1] == b'*') => {
                let end = if data[i + 1] == b'/' {
                    line_comment_end(data, i)
                } else {
                    block_comment_end(data, i)
                };
                if i >= w.skip_until {
                    w.spans.push((i, end));
                    if literals {
                        d.text(&mut w, i, end)?;
                    }
                }
                i = end;
            }
            b'"' => {
                let end = string_end(data, i);
                literal(&mut w, d, literals, i, i, end, false)?;
                i = end;
            }
            b'\'' => {
                let end = char_end(data, i);
                if i < w.skip_until {
                    i = end;
                    continue;
                }
                if i > 0 && IDC[data[i - 1] as usize] && data[token_start(data, i)].is_ascii_digit()
                {
                    i += 1; // C++14 digit separator (1'000): not a character literal
                    continue;
                }
                let ts = token_start(data, i);
                let start = if ts < i && is_literal_prefix(&data[ts..i]) {
                    ts
                } else {
                    i
                };
                w.spans.push((start, end));
                i = end;
            }
            b'#' => {
                let Some((pstart, pend, angled, dend)) = include_at(data, i) else {
                    i += 1;
                    continue;
                };
                let at = i;
                i = dend;
                if at < w.skip_until || !at_line_start(data, at) {
                    continue;
                }
                d.include(&mut w, at, pstart, pend, angled)?;
            }
            b'<' if launch && data[i..].starts_with(b"<<<") => {
                if i >= w.skip_until {
                    let o = w.out_offset(i);
                    w.launches.push((o, i));
                }
                i += 3;
            }
            _ => i += 1,
        }
    }
    Ok(w)
}

/// A string, character or raw-string literal matched at `at` (`raw`: `at` is the `R`), whose prefix
/// (`u8`, `L`, ... or any identifier run before `R"`) starts at or after `run_start`.
#[inline]
fn literal<D: Decider>(
    w: &mut Walk<'_>,
    d: &mut D,
    literals: bool,
    at: usize,
    run_start: usize,
    end: usize,
    raw: bool,
) -> Result<(), D::Error> {
    if at < w.skip_until {
        return Ok(());
    }
    let data = w.data;
    let start = if raw {
        run_start
    } else {
        let ts = token_start(data, at);
        if ts < at && is_literal_prefix(&data[ts..at]) {
            ts
        } else {
            at
        }
    };
    w.spans.push((start, end));
    if literals {
        d.text(w, at, end)?;
    }
    Ok(())
}

/// The cheap test made before asking whether the call at `start` is a statement of its own: the byte before
/// it on its line (blanks and a leading `::` skipped) may end what precedes a statement. The same test as
/// `_maybe_statement` in tools/hipify/translate.py.
#[inline]
pub fn maybe_statement(data: &[u8], start: usize) -> bool {
    let mut j = start;
    while j > 0 && matches!(data[j - 1], b' ' | b'\t') {
        j -= 1;
    }
    if j >= 2 && data[j - 2] == b':' && data[j - 1] == b':' {
        j -= 2;
        while j > 0 && matches!(data[j - 1], b' ' | b'\t') {
            j -= 1;
        }
    }
    if j == 0 {
        return true;
    }
    let c = data[j - 1];
    matches!(c, b'\n' | b'\r' | b';' | b'{' | b'}' | b')' | b':' | b'/')
        || c.is_ascii_alphanumeric()
        || c == b'_'
}

fn is_literal_prefix(p: &[u8]) -> bool {
    matches!(p, b"u8" | b"u" | b"U" | b"L")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments() {
        assert_eq!(line_comment_end(b"// a\nb", 0), 4);
        assert_eq!(line_comment_end(b"// a\\\nb\nc", 0), 7);
        assert_eq!(line_comment_end(b"// a\\\r\nb\nc", 0), 8);
        assert_eq!(line_comment_end(b"// a\\", 0), 4); // a trailing backslash is not part of it
        assert_eq!(block_comment_end(b"/* a */ b", 0), 7);
        assert_eq!(block_comment_end(b"/*/ */", 0), 6);
        assert_eq!(block_comment_end(b"/**/", 0), 4);
        assert_eq!(block_comment_end(b"/* open", 0), 7);
    }

    #[test]
    fn literals() {
        assert_eq!(string_end(b"\"a\\\"b\" c", 0), 6);
        assert_eq!(string_end(b"\"open\nx", 0), 5);
        assert_eq!(string_end(b"\"a\\", 0), 2);
        assert_eq!(char_end(b"'\\''", 0), 4);
        assert_eq!(char_end(b"'x", 0), 2);
        assert_eq!(raw_string_end(b"R\"x()\")x\" tail", 0), Some(9));
        assert_eq!(raw_string_end(b"R\"(a)\"", 0), Some(6));
        assert_eq!(raw_string_end(b"R\"abc", 0), None);
        assert_eq!(raw_string_end(b"R\"(never", 0), None);
        assert_eq!(
            raw_string_end(b"R\"12345678901234567(x)12345678901234567\"", 0),
            None
        );
    }

    #[test]
    fn includes() {
        assert_eq!(include_at(b"#include <a.h>", 0), Some((10, 13, true, 14)));
        assert_eq!(
            include_at(b"# include_next \"b.h\"", 0),
            Some((16, 19, false, 20))
        );
        assert_eq!(include_at(b"#includex <a.h>", 0), None);
        assert_eq!(include_at(b"#include <a.h\n>", 0), None);
        assert!(at_line_start(b"x\n  \t#", 5));
        assert!(!at_line_start(b"x #", 2));
    }
}
