//! tools/hipify's whole tree pass in Rust (pure Rust: no pyo3 here; `crate::py_*` wrap it for Python).
//!
//! `python -m tools hipify` runs it when the module is installed and the command line is one it covers,
//! with a *plan*: everything the Python code derives from the mapping database, the target and the options
//! (per-name actions, header actions, lint rules, messages), exported by tools/hipify/plan.py into the
//! compiled cache. The Python engine stays the reference: every module here names the Python it follows,
//! and tests compare the two byte for byte.

pub mod downgrade; // tools/hipify/downgrade.py: rewrite_call
pub mod insert; // tools/hipify/insert.py: facts, insertion point, rendered lines
pub mod json; // Python's json.dumps text
pub mod masks; // tools/hipify/masks.py: lane-mask classification
pub mod rules; // tools/hipify/lint.py: lint_bytes, silenced
pub mod translate; // tools/hipify/translate.py: the per-file pass (Translator.translate)
pub mod translate_ctx; // translate.py: the context checks of the per-file pass
pub mod translate_launch; // translate.py: convert_launches
pub mod translate_names; // translate.py: the plan's per-name actions, as one table
pub mod tree; // tools/hipify/tree.py: the tree pass
pub mod tree_cli; // tools/hipify/cli.py + model.py: command line, report, summary, the fast path's flow
pub mod tree_fs; // tree.py's _walk and _Writer
pub mod tree_native; // tree.py's _process and project_masks over the per-file modules
pub mod tree_path; // the path arithmetic of tree.py (posixpath, PurePosixPath)
pub mod tree_plan; // the plan file (tools/hipify/plan.py) and the target detection (rocm.py)
pub mod tree_state; // .hipify-state.json
pub mod types;
