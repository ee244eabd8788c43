//! tools/hipify/insert.py in Rust (helper C). Stub: to be written.
