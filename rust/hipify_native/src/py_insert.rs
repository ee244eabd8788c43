//! Python bindings of crate::engine's insert and lint parts (parity tests and the fast path).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_insert_uses, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_defines_and_lines, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_insertion_point, m)?)?;
    m.add_function(wrap_pyfunction!(_insert_render, m)?)?;
    m.add_function(wrap_pyfunction!(_positions, m)?)?;
    m.add_function(wrap_pyfunction!(_line_starts, m)?)?;
    Ok(())
}
