//! tools/hipify/tree.py (hipify_tree), cli.py (options, output) and model.py (report, summary) in Rust, with
//! the plan file, target detection and the fast path's entry (helper D). Stub: to be written.
