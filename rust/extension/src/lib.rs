//! `monarch_runtime._native`, the module file: everything is in `monarch_runtime_native`
//! (rust/runtime), an rlib a compiler cache can keep; this crate only links it into the cdylib, whose
//! `PyInit__native` is the `#[pymodule]` there.
pub use monarch_runtime_native::*;
