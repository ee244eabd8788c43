//! Python bindings of crate::engine's insert and lint parts (parity tests and the fast path).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::engine::types::latin1;
use crate::engine::{insert, rules};

#[pyfunction]
fn _insert_uses(data: &[u8], spans: Vec<(usize, usize)>) -> u32 {
    insert::uses(data, &spans)
}

#[pyfunction]
#[pyo3(signature = (data, sync_macro))]
fn _insert_defines_and_lines(data: &[u8], sync_macro: Option<&str>) -> u32 {
    insert::defines_and_lines(data, sync_macro.map(str::as_bytes))
}

#[pyfunction]
fn _insert_insertion_point(data: &[u8]) -> usize {
    insert::insertion_point(data)
}

#[pyfunction]
#[pyo3(signature = (define, runtime, crlf))]
fn _insert_render<'py>(
    py: Python<'py>,
    define: Option<&str>,
    runtime: Option<&[u8]>,
    crlf: bool,
) -> Bound<'py, PyBytes> {
    PyBytes::new(
        py,
        &insert::render(define.map(str::as_bytes), runtime, crlf),
    )
}

#[pyfunction]
fn _positions(data: &[u8], offsets: Vec<usize>) -> HashMap<usize, (usize, usize)> {
    rules::positions(data, &offsets)
}

#[pyfunction]
fn _line_starts(data: &[u8]) -> Vec<usize> {
    rules::line_starts(data)
}

/// The plan of the last `_lint_bytes` call (tests and timings pass the same JSON again and again).
static LINT_PLAN: Mutex<Option<(String, Arc<rules::LintPlan>)>> = Mutex::new(None);

fn lint_plan(json: &str) -> PyResult<Arc<rules::LintPlan>> {
    let mut cached = LINT_PLAN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((key, plan)) = cached.as_ref() {
        if key == json {
            return Ok(plan.clone());
        }
    }
    let plan = Arc::new(rules::LintPlan::from_json(json).map_err(PyValueError::new_err)?);
    *cached = Some((json.to_string(), plan.clone()));
    Ok(plan)
}

type FindingTuple = (usize, String, String, String, String, bool, String);

/// lint.py's lint_bytes under the plan `lint.export_plan()` gave (as JSON): the findings as
/// (offset, name, kind, reason, suggestion, blocking, rule).
#[pyfunction]
fn _lint_bytes(
    py: Python<'_>,
    plan_json: &str,
    data: &[u8],
    spans: Vec<(usize, usize)>,
) -> PyResult<Vec<FindingTuple>> {
    let plan = lint_plan(plan_json)?;
    let found = py.detach(|| rules::lint_bytes(&plan, data, &spans));
    Ok(found
        .into_iter()
        .map(|f| {
            (
                f.offset,
                latin1(&f.name),
                f.kind,
                latin1(&f.reason),
                latin1(&f.suggestion),
                f.blocking,
                f.rule,
            )
        })
        .collect())
}

#[pyfunction]
fn _lint_silenced(data: &[u8], offset: usize, rule: &str) -> bool {
    rules::silenced(data, offset, rule)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_insert_uses, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_defines_and_lines, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_insertion_point, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_render, m)?)?;
    m.add_function(wrap_pyfunction!(_positions, m)?)?;
    m.add_function(wrap_pyfunction!(_line_starts, m)?)?;
    m.add_function(wrap_pyfunction!(_lint_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_lint_silenced, m)?)?;
    Ok(())
}
