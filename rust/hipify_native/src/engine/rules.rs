//! tools/hipify/lint.py's lint_bytes and silenced in Rust, over crate::lint's candidate scanner (helper C).
//! Stub: to be written.
