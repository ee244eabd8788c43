//! `monarch_hipify_native`: the hot loop of tools/hipify in Rust (optional; the pure-Python engine in
//! tools/hipify/translate.py is the reference and decides everything that is not a plain rename).
//!
//! `Scanner.translate` walks a file once, exactly as the reference regex scanner does, and handles the
//! common tokens itself: comments and literals (their spans), identifiers the mapping database leaves
//! alone, and plain renames. Everything else (a name with a finding, a version downgrade, an include, the
//! optional comment/string translation) is decided by Python callbacks, so the rules live in one place.
//! `LintScanner` finds the lint's candidate matches (tools/hipify/lint.py decides what they mean).

#[allow(dead_code)] // filled in piece by piece; the fast path uses all of it
mod engine;
mod lint;
mod py_insert;
mod py_masks;
mod py_translate;
mod py_tree;
mod scan;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use scan::{
    at_line_start, block_comment_end, char_end, include_at, line_comment_end, raw_string_end,
    string_end, token_start, IDC,
};

/// Bumped whenever the Python <-> Rust contract changes; tools/hipify refuses a module built for another.
const INTERFACE: u32 = 3;

/// FxHash (rustc's): names are short and not attacker-chosen, and SipHash would be a third of the loop.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

enum Slot {
    /// nothing to do with this name
    Skip,
    /// a plain rename, no finding
    Rename(Vec<u8>),
    /// a rename, unless the name may start a statement (`maybe_statement`): then ask Python, which decides
    /// whether the call's result is discarded (and gets `(void)`)
    Statement(Vec<u8>),
    /// ask Python at each occurrence (findings, context checks, downgrades)
    Decide,
}

#[pyclass(module = "monarch_hipify_native")]
struct Scanner {
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
    launch: bool,
    literals: bool,
    slots: HashMap<Vec<u8>, Slot, BuildHasherDefault<Fx>>,
}

impl Scanner {
    fn is_candidate(&self, name: &[u8]) -> bool {
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

/// What the scan of one file collects besides the output.
struct Walk<'a> {
    data: &'a [u8],
    out: Vec<u8>,
    pos: usize,
}

impl Walk<'_> {
    fn replace(&mut self, start: usize, end: usize, text: &[u8]) {
        if self.out.capacity() == 0 {
            self.out.reserve(self.data.len() + self.data.len() / 8 + 64);
        }
        if start > self.pos {
            self.out.extend_from_slice(&self.data[self.pos..start]);
        }
        self.out.extend_from_slice(text);
        self.pos = end;
    }

    /// Output offset of input offset `at` (>= pos): what is emitted once everything before it is.
    fn out_offset(&self, at: usize) -> usize {
        (self.out.len() + at).saturating_sub(self.pos)
    }
}

#[pymethods]
impl Scanner {
    #[new]
    fn new(prefixes: Vec<Vec<u8>>, launch: bool, literals: bool) -> PyResult<Self> {
        let mut short = vec![false; 1 << 16];
        let mut long: HashMap<u16, Vec<Vec<u8>>, BuildHasherDefault<Fx>> = HashMap::default();
        let mut long_two = vec![false; 1 << 16];
        let mut single = [false; 256];
        let mut first = [false; 256];
        for p in prefixes {
            match p.len() {
                0 => return Err(PyValueError::new_err("empty scanner prefix")),
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
        Ok(Scanner {
            short,
            long,
            long_two,
            single,
            first,
            launch,
            literals,
            slots: HashMap::default(),
        })
    }

    /// Translate `data` (no BOM). Callbacks:
    /// - `classify(name) -> None | bytes | (bytes,) | True`: skip, plain rename, rename unless the name may
    ///   start a statement (`maybe_statement`), or ask `on_name` at each occurrence;
    /// - `on_name(start, end) -> None | (text, resume, skip)`: replace `data[start:resume]` with `text`;
    ///   `skip`: tokens before `resume` are consumed (a rewritten call's arguments);
    /// - `on_include(start, path_start, path_end, angled, out_path_start) -> None | (start, end, text)`;
    /// - `on_text(start, end) -> None | bytes`: a comment or literal's new text (only with `literals`);
    /// - `on_statement(start, end) -> bool`: for a `(rename,)` name where `maybe_statement` holds, whether the
    ///   call's result is discarded (then `(void)` goes before the rename).
    ///
    /// Returns (output or None when nothing changed, spans of comments and literals, launches as
    /// (output offset, input offset) of each `<<<`).
    #[allow(clippy::too_many_arguments)]
    fn translate<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        classify: &Bound<'py, PyAny>,
        on_name: &Bound<'py, PyAny>,
        on_include: &Bound<'py, PyAny>,
        on_text: &Bound<'py, PyAny>,
        on_statement: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let n = data.len();
        let mut w = Walk {
            data,
            out: Vec::new(),
            pos: 0,
        };
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut launches: Vec<(usize, usize)> = Vec::new();
        let mut skip_until = 0usize;
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
                    && !self.candidate_before_last(data, s, e)
                {
                    if let Some(end) = raw_string_end(data, e - 1) {
                        self.literal(&mut w, &mut spans, skip_until, e - 1, s, end, true, on_text)?;
                        i = end;
                        continue;
                    }
                }
                i = e;
                if s < skip_until || c.is_ascii_digit() || !self.is_candidate(&data[s..e]) {
                    continue;
                }
                let name = &data[s..e];
                if !self.slots.contains_key(name) {
                    let verdict = classify.call1((PyBytes::new(py, name),))?;
                    let slot = if verdict.is_none() {
                        Slot::Skip
                    } else if let Ok(b) = verdict.downcast::<PyBytes>() {
                        Slot::Rename(b.as_bytes().to_vec())
                    } else if let Ok(t) = verdict.downcast::<PyTuple>() {
                        let (b,): (Bound<'py, PyBytes>,) = t.extract()?;
                        Slot::Statement(b.as_bytes().to_vec())
                    } else {
                        Slot::Decide
                    };
                    self.slots.insert(name.to_vec(), slot);
                }
                match &self.slots[name] {
                    Slot::Skip => {}
                    Slot::Rename(text) => w.replace(s, e, text),
                    Slot::Statement(text) => {
                        if maybe_statement(data, s) && on_statement.call1((s, e))?.is_truthy()? {
                            let mut with_void = b"(void)".to_vec();
                            with_void.extend_from_slice(text);
                            w.replace(s, e, &with_void);
                        } else {
                            w.replace(s, e, text);
                        }
                    }
                    Slot::Decide => {
                        let r = on_name.call1((s, e))?;
                        if !r.is_none() {
                            let (text, resume, skip): (Bound<'py, PyBytes>, usize, bool) =
                                r.extract()?;
                            if resume < s || resume > n {
                                return Err(PyValueError::new_err(
                                    "on_name: resume offset out of range",
                                ));
                            }
                            w.replace(s, resume, text.as_bytes());
                            if skip {
                                // tokens before `resume` are ignored, not skipped over: the reference
                                // scanner goes on tokenising from the name's end
                                skip_until = resume;
                            }
                        }
                    }
                }
                continue;
            }
            match c {
                b'/' if i + 1 < n && (data[i + 1] == b'/' || data[i + 1] == b'*') => {
                    let end = if data[i + 1] == b'/' {
                        line_comment_end(data, i)
                    } else {
                        block_comment_end(data, i)
                    };
                    if i >= skip_until {
                        spans.push((i, end));
                        if self.literals {
                            self.retranslate(&mut w, i, end, on_text)?;
                        }
                    }
                    i = end;
                }
                b'"' => {
                    let end = string_end(data, i);
                    self.literal(&mut w, &mut spans, skip_until, i, i, end, false, on_text)?;
                    i = end;
                }
                b'\'' => {
                    let end = char_end(data, i);
                    if i < skip_until {
                        i = end;
                        continue;
                    }
                    if i > 0
                        && IDC[data[i - 1] as usize]
                        && data[token_start(data, i)].is_ascii_digit()
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
                    spans.push((start, end));
                    i = end;
                }
                b'#' => {
                    let Some((pstart, pend, angled, dend)) = include_at(data, i) else {
                        i += 1;
                        continue;
                    };
                    let at = i;
                    i = dend;
                    if at < skip_until || !at_line_start(data, at) {
                        continue;
                    }
                    let r = on_include.call1((at, pstart, pend, angled, w.out_offset(pstart)))?;
                    if !r.is_none() {
                        let (start, end, text): (usize, usize, Bound<'py, PyBytes>) =
                            r.extract()?;
                        if end < start || end > n {
                            return Err(PyValueError::new_err(
                                "on_include: replacement out of range",
                            ));
                        }
                        w.replace(start, end, text.as_bytes());
                    }
                }
                b'<' if self.launch && data[i..].starts_with(b"<<<") => {
                    if i >= skip_until {
                        launches.push((w.out_offset(i), i));
                    }
                    i += 3;
                }
                _ => i += 1,
            }
        }
        let out = if w.pos == 0 {
            py.None().into_bound(py)
        } else {
            w.out.extend_from_slice(&data[w.pos..]);
            PyBytes::new(py, &w.out).into_any()
        };
        PyTuple::new(
            py,
            [
                out,
                spans.into_pyobject(py)?.into_any(),
                launches.into_pyobject(py)?.into_any(),
            ],
        )
    }
}

impl Scanner {
    /// A string, character or raw-string literal matched at `at` (`raw`: `at` is the `R`), whose prefix
    /// (`u8`, `L`, ... or any identifier run before `R"`) starts at or after `run_start`.
    #[allow(clippy::too_many_arguments)]
    fn literal(
        &self,
        w: &mut Walk<'_>,
        spans: &mut Vec<(usize, usize)>,
        skip_until: usize,
        at: usize,
        run_start: usize,
        end: usize,
        raw: bool,
        on_text: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if at < skip_until {
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
        spans.push((start, end));
        if self.literals {
            self.retranslate(w, at, end, on_text)?;
        }
        Ok(())
    }

    fn retranslate(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        on_text: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let r = on_text.call1((start, end))?;
        if !r.is_none() {
            let text = r.downcast::<PyBytes>()?;
            w.replace(start, end, text.as_bytes());
        }
        Ok(())
    }
}

/// The cheap test made before asking whether the call at `start` is a statement of its own: the byte before
/// it on its line (blanks and a leading `::` skipped) may end what precedes a statement. The same test as
/// `_maybe_statement` in tools/hipify/translate.py.
fn maybe_statement(data: &[u8], start: usize) -> bool {
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

#[pymodule]
fn monarch_hipify_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("INTERFACE", INTERFACE)?;
    m.add_class::<Scanner>()?;
    m.add_class::<lint::LintScanner>()?;
    py_masks::register(m)?;
    py_insert::register(m)?;
    py_translate::register(m)?;
    py_tree::register(m)?;
    Ok(())
}
