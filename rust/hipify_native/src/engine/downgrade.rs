//! tools/hipify/downgrade.py's rewrite_call in Rust (helper B). Stub: to be written.
