//! Python bindings of crate::engine's translate part (parity tests, benchmarks and the fast path):
//! `_translate_file(plan_json, project_masks, data)` and `NativeTranslator(plan_json, project_masks)`, whose
//! `translate(data)` gives translate.py's FileResult fields as a tuple (see `result_tuple`).

use std::time::Instant;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::engine::translate::{known_masks, Known, ProjectMask, TranslatePlan, Translator};
use crate::engine::types::{from_latin1, latin1, FileResult};

/// masks.py's ProjectMasks: (name, how, value, width, signed) rows.
type ProjectMasks = Vec<(String, String, u64, u32, bool)>;

fn known(rows: ProjectMasks) -> PyResult<Known> {
    let mut table = Vec::with_capacity(rows.len());
    for (name, how, value, width, signed) in rows {
        let bad = || PyValueError::new_err(format!("project mask {name:?}: not Latin-1"));
        table.push(ProjectMask {
            name: from_latin1(&name).ok_or_else(bad)?,
            how: from_latin1(&how).ok_or_else(bad)?,
            value,
            width,
            signed,
        });
    }
    Ok(known_masks(&table))
}

fn build(plan_json: &str, project_masks: ProjectMasks) -> PyResult<Translator> {
    let plan = TranslatePlan::from_json(plan_json).map_err(PyValueError::new_err)?;
    Translator::new(&plan, known(project_masks)?).map_err(PyValueError::new_err)
}

fn text<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyString> {
    PyString::new(py, &latin1(b))
}

/// (data, changed, findings as (offset, name, kind, reason, suggestion, blocking, rule), includes as
/// (out_start, out_end, spelling, angled, in_offset, mapped), defines, comment_spans, facts, unresolved)
fn result_tuple<'py>(py: Python<'py>, r: FileResult) -> PyResult<Bound<'py, PyTuple>> {
    let findings = PyList::empty(py);
    for f in &r.findings {
        findings.append((
            f.offset,
            text(py, &f.name),
            &f.kind,
            text(py, &f.reason),
            text(py, &f.suggestion),
            f.blocking,
            &f.rule,
        ))?;
    }
    let includes = PyList::empty(py);
    for i in &r.includes {
        includes.append((
            i.out_start,
            i.out_end,
            text(py, &i.spelling),
            i.angled,
            i.in_offset,
            i.mapped,
        ))?;
    }
    let defines = PyList::empty(py);
    for d in &r.defines {
        defines.append(text(py, d))?;
    }
    let unresolved = PyList::empty(py);
    for u in &r.unresolved {
        unresolved.append(text(py, u))?;
    }
    PyTuple::new(
        py,
        [
            PyBytes::new(py, &r.data).into_any(),
            r.changed.into_pyobject(py)?.to_owned().into_any(),
            findings.into_any(),
            includes.into_any(),
            defines.into_any(),
            r.comment_spans.into_pyobject(py)?.into_any(),
            r.facts.into_pyobject(py)?.into_any(),
            unresolved.into_any(),
        ],
    )
}

/// One file with a plan built for it (tests; `NativeTranslator` keeps the plan across files).
#[pyfunction]
fn _translate_file<'py>(
    py: Python<'py>,
    plan_json: &str,
    project_masks: ProjectMasks,
    data: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let tr = build(plan_json, project_masks)?;
    result_tuple(py, tr.translate(data))
}

/// Seconds per parse of the plan and build of its translator (the start-up cost), the best of `repeat`.
#[pyfunction]
fn _plan_parse_seconds(plan_json: &str, repeat: usize) -> PyResult<(f64, f64)> {
    let mut best_parse = f64::INFINITY;
    let mut best_total = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t0 = Instant::now();
        let plan = TranslatePlan::from_json(plan_json).map_err(PyValueError::new_err)?;
        let t1 = Instant::now();
        let tr = Translator::new(&plan, Known::default()).map_err(PyValueError::new_err)?;
        let t2 = Instant::now();
        drop(tr);
        best_parse = best_parse.min((t1 - t0).as_secs_f64());
        best_total = best_total.min((t2 - t0).as_secs_f64());
    }
    Ok((best_parse, best_total))
}

#[pyclass(module = "monarch_hipify_native", frozen)]
struct NativeTranslator {
    tr: Translator,
}

#[pymethods]
impl NativeTranslator {
    #[new]
    #[pyo3(signature = (plan_json, project_masks = Vec::new()))]
    fn new(plan_json: &str, project_masks: ProjectMasks) -> PyResult<Self> {
        Ok(NativeTranslator {
            tr: build(plan_json, project_masks)?,
        })
    }

    /// translate.py's Translator.translate, as `result_tuple`.
    fn translate<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
        let r = py.detach(|| self.tr.translate(data));
        result_tuple(py, r)
    }

    /// The same plan with other project masks.
    fn with_masks(&self, project_masks: ProjectMasks) -> PyResult<Self> {
        Ok(NativeTranslator {
            tr: self.tr.with_masks(known(project_masks)?),
        })
    }

    /// Benchmark: seconds to translate every file of `files` once (the best of `repeat` rounds), in Rust
    /// only (no Python objects made), and the total of the outputs' lengths.
    fn bench(&self, py: Python<'_>, files: Vec<Vec<u8>>, repeat: usize) -> (f64, usize) {
        py.detach(|| {
            let mut best = f64::INFINITY;
            let mut total = 0;
            for _ in 0..repeat.max(1) {
                let t0 = Instant::now();
                total = 0;
                for f in &files {
                    total += self.tr.translate(f).data.len();
                }
                best = best.min(t0.elapsed().as_secs_f64());
            }
            (best, total)
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_translate_file, m)?)?;
    m.add_function(wrap_pyfunction!(_plan_parse_seconds, m)?)?;
    m.add_class::<NativeTranslator>()?;
    Ok(())
}
