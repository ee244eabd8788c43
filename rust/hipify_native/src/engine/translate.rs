//! tools/hipify/translate.py's per-file pass in Rust, with the plan's translation section (helper A).
//! Stub: to be written.
