//! `monarch_hipify_native`: the hot loop of tools/hipify in Rust (optional; the pure-Python engine in
//! tools/hipify/translate.py is the reference and decides everything that is not a plain rename).
//!
//! `Scanner.translate` walks a file once, exactly as the reference regex scanner does, and handles the
//! common tokens itself: comments and literals (their spans), identifiers the mapping database leaves
//! alone, and plain renames. Everything else (a name with a finding, a version downgrade, an include, the
//! optional comment/string translation) is decided by Python callbacks, so the rules live in one place.
//! `LintScanner` finds the lint's candidate matches (tools/hipify/lint.py decides what they mean).

mod engine;
mod lint;
mod py_insert;
mod py_masks;
mod py_translate;
mod py_tree;
mod scan;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use scan::{maybe_statement, walk, Decider, FxMap, Prefixes, Walk};

/// Bumped whenever the Python <-> Rust contract changes; tools/hipify refuses a module built for another.
const INTERFACE: u32 = 3;

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
    prefixes: Prefixes,
    launch: bool,
    literals: bool,
    slots: FxMap<Vec<u8>, Slot>,
}

/// The scan's decisions, by Python callbacks (see `Scanner.translate`).
struct PyDecider<'s, 'py> {
    py: Python<'py>,
    slots: &'s mut FxMap<Vec<u8>, Slot>,
    classify: &'s Bound<'py, PyAny>,
    on_name: &'s Bound<'py, PyAny>,
    on_include: &'s Bound<'py, PyAny>,
    on_text: &'s Bound<'py, PyAny>,
    on_statement: &'s Bound<'py, PyAny>,
}

impl Decider for PyDecider<'_, '_> {
    type Error = PyErr;

    fn name(&mut self, w: &mut Walk<'_>, s: usize, e: usize) -> PyResult<()> {
        let py = self.py;
        let data = w.data;
        let name = &data[s..e];
        if !self.slots.contains_key(name) {
            let verdict = self.classify.call1((PyBytes::new(py, name),))?;
            let slot = if verdict.is_none() {
                Slot::Skip
            } else if let Ok(b) = verdict.downcast::<PyBytes>() {
                Slot::Rename(b.as_bytes().to_vec())
            } else if let Ok(t) = verdict.downcast::<PyTuple>() {
                let (b,): (Bound<'_, PyBytes>,) = t.extract()?;
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
                if maybe_statement(data, s) && self.on_statement.call1((s, e))?.is_truthy()? {
                    w.replace_parts(s, e, &[b"(void)", text]);
                } else {
                    w.replace(s, e, text);
                }
            }
            Slot::Decide => {
                let r = self.on_name.call1((s, e))?;
                if !r.is_none() {
                    let (text, resume, skip): (Bound<'_, PyBytes>, usize, bool) = r.extract()?;
                    if resume < s || resume > data.len() {
                        return Err(PyValueError::new_err("on_name: resume offset out of range"));
                    }
                    w.replace(s, resume, text.as_bytes());
                    if skip {
                        // tokens before `resume` are ignored, not skipped over: the reference
                        // scanner goes on tokenising from the name's end
                        w.skip_until = resume;
                    }
                }
            }
        }
        Ok(())
    }

    fn include(
        &mut self,
        w: &mut Walk<'_>,
        at: usize,
        pstart: usize,
        pend: usize,
        angled: bool,
    ) -> PyResult<()> {
        let r = self
            .on_include
            .call1((at, pstart, pend, angled, w.out_offset(pstart)))?;
        if !r.is_none() {
            let (start, end, text): (usize, usize, Bound<'_, PyBytes>) = r.extract()?;
            if end < start || end > w.data.len() {
                return Err(PyValueError::new_err(
                    "on_include: replacement out of range",
                ));
            }
            w.replace(start, end, text.as_bytes());
        }
        Ok(())
    }

    fn text(&mut self, w: &mut Walk<'_>, start: usize, end: usize) -> PyResult<()> {
        let r = self.on_text.call1((start, end))?;
        if !r.is_none() {
            let text = r.downcast::<PyBytes>()?;
            w.replace(start, end, text.as_bytes());
        }
        Ok(())
    }
}

#[pymethods]
impl Scanner {
    #[new]
    fn new(prefixes: Vec<Vec<u8>>, launch: bool, literals: bool) -> PyResult<Self> {
        let prefixes =
            Prefixes::new(prefixes).ok_or_else(|| PyValueError::new_err("empty scanner prefix"))?;
        Ok(Scanner {
            prefixes,
            launch,
            literals,
            slots: FxMap::default(),
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
        let mut d = PyDecider {
            py,
            slots: &mut self.slots,
            classify,
            on_name,
            on_include,
            on_text,
            on_statement,
        };
        let mut w = walk(&self.prefixes, self.launch, self.literals, data, &mut d)?;
        let out = match w.output() {
            None => py.None().into_bound(py),
            Some(out) => PyBytes::new(py, &out).into_any(),
        };
        PyTuple::new(
            py,
            [
                out,
                std::mem::take(&mut w.spans).into_pyobject(py)?.into_any(),
                std::mem::take(&mut w.launches)
                    .into_pyobject(py)?
                    .into_any(),
            ],
        )
    }
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
