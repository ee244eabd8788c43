//! tools/hipify/masks.py in Rust (helper B). Stub: to be written.
