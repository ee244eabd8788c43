//! Candidate matches of the lint's rule patterns (tools/hipify/lint.py `_RULES`), found with the
//! `regex` crate. The patterns are the lint's own, passed in at construction; a trailing negative
//! look-ahead `(?![...])` (which `regex` lacks) comes separately as the set of bytes that must not follow
//! a match, and a match followed by one is dropped and the search resumed one byte later, which is what
//! Python's backtracking `re.finditer` does for these patterns. A pattern is compiled the first time a
//! file contains its leading literal (most runs need few of them, and start-up time counts).
//!
//! `Candidates` is the scanner itself (pure Rust: crate::engine::rules uses it too); `LintScanner` is its
//! Python face.

use memchr::memmem;
use pyo3::exceptions::PyValueError;
use std::sync::OnceLock;

use pyo3::prelude::*;
use regex::bytes::Regex;

/// (device code?, markers found, matches as (pattern index, start, end))
pub(crate) type ScanResult = (bool, u64, Vec<(usize, usize, usize)>);

struct Pattern {
    source: String,
    regex: OnceLock<Regex>,
    /// the literal every match starts with (may be empty)
    needle: memmem::Finder<'static>,
    not_next: [bool; 256],
    device_only: bool,
}

/// The candidate scanner (see the module doc).
pub(crate) struct Candidates {
    patterns: Vec<Pattern>,
    device_markers: Vec<memmem::Finder<'static>>,
    markers: Vec<memmem::Finder<'static>>,
}

impl Candidates {
    /// `patterns`: (regex source, bytes that must not follow a match, the literal every match starts
    /// with, only in files with device code); `device_markers`: a file has device code when one occurs;
    /// `markers`: literals to report on.
    pub(crate) fn new(
        patterns: Vec<(String, Vec<u8>, Vec<u8>, bool)>,
        device_markers: Vec<Vec<u8>>,
        markers: Vec<Vec<u8>>,
    ) -> Self {
        let mut compiled = Vec::with_capacity(patterns.len());
        for (source, not_next, needle, device_only) in patterns {
            let mut table = [false; 256];
            for b in not_next {
                table[b as usize] = true;
            }
            compiled.push(Pattern {
                source,
                regex: OnceLock::new(),
                needle: memmem::Finder::new(&needle).into_owned(),
                not_next: table,
                device_only,
            });
        }
        let finders = |v: Vec<Vec<u8>>| {
            v.into_iter()
                .map(|m| memmem::Finder::new(&m).into_owned())
                .collect()
        };
        Candidates {
            patterns: compiled,
            device_markers: finders(device_markers),
            markers: finders(markers),
        }
    }

    /// Compiles every pattern now (an error names the first that does not compile).
    pub(crate) fn compile_all(&self) -> Result<(), String> {
        for p in &self.patterns {
            p.compiled()?;
        }
        Ok(())
    }

    /// (whether the file has device code, bit mask of the markers found, matches as (pattern index,
    /// start, end) in pattern order, each pattern's in text order, non-overlapping as re.finditer).
    pub(crate) fn scan(&self, data: &[u8]) -> Result<ScanResult, String> {
        let mut out = Vec::new();
        let (device, found) = self.scan_into(data, &mut out)?;
        Ok((device, found, out))
    }

    /// `scan`, its matches appended to `out` (cleared first).
    pub(crate) fn scan_into(
        &self,
        data: &[u8],
        out: &mut Vec<(usize, usize, usize)>,
    ) -> Result<(bool, u64), String> {
        out.clear();
        let device = self.device_markers.iter().any(|f| f.find(data).is_some());
        let mut found = 0u64;
        for (i, f) in self.markers.iter().enumerate().take(64) {
            if f.find(data).is_some() {
                found |= 1 << i;
            }
        }
        for (idx, p) in self.patterns.iter().enumerate() {
            let absent = !p.needle.needle().is_empty() && p.needle.find(data).is_none();
            if (p.device_only && !device) || absent {
                continue;
            }
            let regex = p.compiled()?;
            let mut at = 0;
            while at <= data.len() {
                let Some(m) = regex.find_at(data, at) else {
                    break;
                };
                let (s, e) = (m.start(), m.end());
                if e < data.len() && p.not_next[data[e] as usize] {
                    at = s + 1;
                    continue;
                }
                out.push((idx, s, e));
                at = if e > s { e } else { e + 1 };
            }
        }
        Ok((device, found))
    }
}

impl Pattern {
    fn compiled(&self) -> Result<&Regex, String> {
        if let Some(r) = self.regex.get() {
            return Ok(r);
        }
        let r = Regex::new(&format!("(?-u){}", self.source))
            .map_err(|e| format!("lint pattern {:?}: {e}", self.source))?;
        Ok(self.regex.get_or_init(|| r))
    }
}

#[pyclass(module = "monarch_hipify_native")]
pub struct LintScanner {
    inner: Candidates,
}

#[pymethods]
impl LintScanner {
    /// `patterns`: (regex source, bytes that must not follow a match, the literal every match starts
    /// with, only in files with device code); `device_markers`: a file has device code when one occurs;
    /// `markers`: literals to report on.
    #[new]
    fn new(
        patterns: Vec<(String, Vec<u8>, Vec<u8>, bool)>,
        device_markers: Vec<Vec<u8>>,
        markers: Vec<Vec<u8>>,
    ) -> PyResult<Self> {
        Ok(LintScanner {
            inner: Candidates::new(patterns, device_markers, markers),
        })
    }

    /// (whether the file has device code, bit mask of the markers found, matches as (pattern index,
    /// start, end) in pattern order, each pattern's in text order, non-overlapping as re.finditer).
    fn scan(&self, data: &[u8]) -> PyResult<ScanResult> {
        self.inner.scan(data).map_err(PyValueError::new_err)
    }
}
