//! Python bindings of crate::engine's translate part (parity tests and the fast path).

use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
