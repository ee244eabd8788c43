//! Python bindings of crate::engine's masks and downgrade parts (parity tests: tests/hipify/test_native_masks.py).
//!
//! Texts cross as Python does: names and "how" texts are `str` (Latin-1), file data and mask texts `bytes`;
//! project masks are tools/hipify/masks.py's ProjectMasks tuples `(name, how, value, width, signed)`.

use std::collections::HashSet;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::engine::downgrade::{self, Action, Downgrade};
use crate::engine::masks::{self, ProjectMask};
use crate::engine::types::{from_latin1, latin1};

type Row = (String, String, u64, u32, bool);

fn latin1_arg(text: &str) -> PyResult<Vec<u8>> {
    from_latin1(text)
        .ok_or_else(|| PyValueError::new_err("a char >= 256 where Latin-1 text is expected"))
}

/// ProjectMasks tuples into rows.
fn project_masks(rows: Vec<Row>) -> PyResult<Vec<ProjectMask>> {
    rows.into_iter()
        .map(|(name, how, value, width, signed)| {
            Ok(ProjectMask {
                name: latin1_arg(&name)?,
                how: latin1_arg(&how)?,
                value,
                width,
                signed,
            })
        })
        .collect()
}

fn rows<'py>(py: Python<'py>, table: &[ProjectMask]) -> PyResult<Bound<'py, PyTuple>> {
    let items: Vec<Row> = table
        .iter()
        .map(|r| (latin1(&r.name), latin1(&r.how), r.value, r.width, r.signed))
        .collect();
    PyTuple::new(py, items)
}

/// `masks.classify(data, call_start, mask, masks.known_masks(project_masks))` as (cls, how, unresolved: bytes).
#[pyfunction]
#[pyo3(signature = (data, call_start, mask, project_masks = Vec::new()))]
fn _masks_classify(
    py: Python<'_>,
    data: &[u8],
    call_start: usize,
    mask: &[u8],
    project_masks: Vec<Row>,
) -> PyResult<(&'static str, String, Py<PyBytes>)> {
    let known = masks::known_masks(&self::project_masks(project_masks)?);
    let m = masks::classify(data, call_start, mask, &known);
    Ok((
        m.cls.as_str(),
        latin1(&m.how),
        PyBytes::new(py, m.unresolved.as_deref().unwrap_or(b"")).unbind(),
    ))
}

/// `masks.first_argument(data, end)`
#[pyfunction]
fn _masks_first_argument(data: &[u8], end: usize) -> Option<(usize, usize)> {
    masks::first_argument(data, end)
}

/// `masks.is_name(text)`
#[pyfunction]
fn _masks_is_name(text: &[u8]) -> bool {
    masks::is_name(text)
}

/// `masks.int_type(words)`
#[pyfunction]
fn _masks_int_type(words: &[u8]) -> Option<(u32, bool)> {
    masks::int_type(words)
}

/// `masks.constant(text)` (no names)
#[pyfunction]
fn _masks_constant(text: &[u8]) -> Option<(u64, u32, bool)> {
    masks::constant(text, None)
}

/// `masks.header_masks(data, wanted)`: {name: (how, (value, width, signed))}, in Python's order.
#[pyfunction]
fn _masks_header_masks<'py>(
    py: Python<'py>,
    data: &[u8],
    wanted: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyDict>> {
    let wanted: HashSet<Vec<u8>> = wanted.into_iter().collect();
    let out = PyDict::new(py);
    for (name, (how, value)) in masks::header_masks(data, &wanted) {
        out.set_item(PyBytes::new(py, &name), (latin1(&how), value))?;
    }
    Ok(out)
}

/// `masks.merge_header_masks(tables)` for tables as `_masks_header_masks` returns them (lists of items).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn _masks_merge<'py>(
    py: Python<'py>,
    tables: Vec<Vec<(Vec<u8>, (String, (u64, u32, bool)))>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut converted = Vec::with_capacity(tables.len());
    for table in tables {
        let mut t = masks::HeaderTable::new();
        for (name, (how, value)) in table {
            t.push((name, (latin1_arg(&how)?, value)));
        }
        converted.push(t);
    }
    rows(py, &masks::merge_header_masks(&converted))
}

/// `masks.known_masks(table)` then back to the tuple form (the 1:1 conversion both ways).
#[pyfunction]
fn _masks_roundtrip<'py>(py: Python<'py>, table: Vec<Row>) -> PyResult<Bound<'py, PyTuple>> {
    let parsed = project_masks(table)?;
    let json = serde_json::to_string(&parsed).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let back: Vec<ProjectMask> =
        serde_json::from_str(&json).map_err(|e| PyValueError::new_err(e.to_string()))?;
    rows(py, &back)
}

/// `downgrade.rewrite_call(data, end, Downgrade(cuda_name, below, replacement, action))` with text as bytes.
#[pyfunction]
fn _downgrade_rewrite(
    py: Python<'_>,
    data: &[u8],
    end: usize,
    cuda_name: &str,
    below: (u32, u32),
    replacement: &[u8],
    action: &str,
) -> PyResult<Option<(Py<PyBytes>, usize)>> {
    let action = Action::from_str(action)
        .ok_or_else(|| PyValueError::new_err(format!("bad action {action:?}")))?;
    let dg = Downgrade {
        cuda_name: latin1_arg(cuda_name)?,
        below,
        replacement: replacement.to_vec(),
        action,
    };
    Ok(downgrade::rewrite_call(data, end, &dg)
        .map(|(text, resume)| (PyBytes::new(py, &text).unbind(), resume)))
}

/// A Downgrade from its JSON form, back as (cuda_name, below, replacement, action).
#[pyfunction]
fn _downgrade_from_json(json: &str) -> PyResult<(String, (u32, u32), String, &'static str)> {
    let dg: Downgrade =
        serde_json::from_str(json).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((
        latin1(&dg.cuda_name),
        dg.below,
        latin1(&dg.replacement),
        dg.action.as_str(),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_masks_classify, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_first_argument, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_is_name, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_int_type, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_constant, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_header_masks, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_merge, m)?)?;
    m.add_function(wrap_pyfunction!(_masks_roundtrip, m)?)?;
    m.add_function(wrap_pyfunction!(_downgrade_rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(_downgrade_from_json, m)?)?;
    Ok(())
}
