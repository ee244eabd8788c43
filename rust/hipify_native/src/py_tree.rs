//! Python bindings of crate::engine's tree part: the fast path's entry (`hipify_main`, called by
//! tools/__main__.py) and test hooks.

use std::collections::{BTreeSet, HashSet};

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::engine::tree::{Mode, Processed, Step, TreeError};
use crate::engine::tree_native::NativeStep;
use crate::engine::tree_state::{FindingRow, IncludeRow};
use crate::engine::{tree_cli, tree_path, tree_plan};

/// The per-file step of parity tests: tools/hipify/tree.py's own `_process` and `project_masks`, through a
/// Python object with `process(path, translate, masks, lint) -> tuple` and
/// `project_masks(paths, wanted) -> (table, names)`.
struct Bridge {
    obj: Py<PyAny>,
    /// one call at a time (the Python translator is not reentrant across threads)
    lock: std::sync::Mutex<()>,
}

type ProcessedTuple = (
    String,
    String,
    bool,
    Option<Vec<u8>>,
    Vec<(i64, i64, String, String, String, String, bool, String)>,
    Vec<(i64, i64, String, bool, bool)>,
    Vec<String>,
    i64,
    i64,
    i64,
    Vec<String>,
    String,
);

impl Step for Bridge {
    type Masks = Py<PyAny>;

    fn process(
        &self,
        path: &str,
        _data: &[u8],
        translate: bool,
        masks: Option<&Py<PyAny>>,
        lint: bool,
    ) -> Result<Processed, TreeError> {
        let _one = self
            .lock
            .lock()
            .map_err(|_| TreeError::Fallback("bridge lock".into()))?;
        Python::attach(|py| -> PyResult<Processed> {
            let m = masks.map_or_else(|| py.None(), |m| m.clone_ref(py));
            let r = self
                .obj
                .call_method1(py, "process", (path, translate, m, lint))?;
            let t: ProcessedTuple = r.extract(py)?;
            Ok(Processed {
                mode: match t.0.as_str() {
                    "translate" => Mode::Translate,
                    "copy" => Mode::Copy,
                    _ => Mode::Error,
                },
                sha: t.1,
                changed: t.2,
                data: t.3,
                findings: t
                    .4
                    .into_iter()
                    .map(|f| FindingRow(f.0, f.1, f.2, f.3, f.4, f.5, f.6, f.7))
                    .collect(),
                includes: t
                    .5
                    .into_iter()
                    .map(|i| IncludeRow(i.0, i.1, i.2, i.3, i.4))
                    .collect(),
                defines: t.6,
                facts: t.7,
                insert_at: t.8,
                insert_line: t.9,
                unresolved: t.10,
                error: t.11,
            })
        })
        .map_err(|e| TreeError::Fallback(format!("bridge: {e}")))
    }

    fn project_masks(
        &self,
        paths: &[&str],
        _headers: &[(&str, &[u8])],
        wanted: &BTreeSet<String>,
    ) -> Result<(Py<PyAny>, HashSet<String>), TreeError> {
        let _one = self
            .lock
            .lock()
            .map_err(|_| TreeError::Fallback("bridge lock".into()))?;
        Python::attach(|py| -> PyResult<(Py<PyAny>, HashSet<String>)> {
            let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
            let r = self
                .obj
                .call_method1(py, "project_masks", (paths.to_vec(), wanted))?;
            let (table, names): (Py<PyAny>, Vec<String>) = r.extract(py)?;
            Ok((table, names.into_iter().collect()))
        })
        .map_err(|e| TreeError::Fallback(format!("bridge: {e}")))
    }
}

/// A plan thread's result.
fn joined<T>(r: std::thread::Result<Result<T, String>>) -> Result<T, TreeError> {
    r.map_err(|_| TreeError::Fallback("a plan thread panicked".into()))?
        .map_err(TreeError::Fallback)
}

/// `python -m tools hipify ARGV` natively: `(exit status, stdout text or None, stderr text)`, or a `str`
/// saying why not (the Python path then runs, with the same result). `tools_dir`: the `tools` package's
/// directory (plans are per checkout). `bridge`: see `Bridge` (parity tests). `plan_text`: the plan's
/// contents instead of the cached file (tests).
#[pyfunction]
#[pyo3(signature = (argv, tools_dir, bridge=None, plan_text=None))]
fn hipify_main(
    py: Python<'_>,
    argv: Vec<String>,
    tools_dir: String,
    bridge: Option<Py<PyAny>>,
    plan_text: Option<String>,
) -> PyResult<Py<PyAny>> {
    let outcome: Result<tree_cli::Outcome, String> = py.detach(|| {
        // A panic is a bug of the native pass: the run is left to the Python path (the reference), which
        // redoes it whole; a fresh output's staging directory is removed while unwinding (tree_fs::Writer).
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            native_run(&argv, &tools_dir, bridge, plan_text.as_deref())
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!(
                "the native pass failed ({what}): a bug, please report it"
            ))
        })
    });
    match outcome {
        Err(why) => Ok(PyString::new(py, &why).into_any().unbind()),
        Ok(o) => {
            // (the report is JSON: ASCII)
            let out = o.stdout.map(|b| {
                PyString::new(py, &String::from_utf8_lossy(&b))
                    .into_any()
                    .unbind()
            });
            Ok(PyTuple::new(
                py,
                [
                    o.rc.into_pyobject(py)?.into_any().unbind(),
                    out.unwrap_or_else(|| py.None()),
                    PyString::new(py, &o.stderr).into_any().unbind(),
                ],
            )?
            .into_any()
            .unbind())
        }
    }
}

/// tree.py's `_output_rel(rel, changed, naming)` (test hook).
#[pyfunction]
fn _output_rel(rel: &str, changed: bool, naming: &str) -> String {
    tree_path::output_rel(rel, changed, naming == "keep")
}

/// posixpath.normpath, str(PurePosixPath(..)), os.path.splitext()[1], PurePath.suffix, tree.py's
/// `_relative` (test hook): `(normpath, pure, splitext, suffix)` of `path`, and `_relative(path, base)`.
#[pyfunction]
fn _paths(path: &str, base: &str) -> (String, String, String, String, String) {
    (
        tree_path::normpath(path),
        tree_path::pure_path(path),
        tree_path::splitext_ext(path).to_string(),
        tree_path::suffix(tree_path::basename(path)).to_string(),
        tree_path::relative(path, base),
    )
}

/// The plan's file tables (plan.py's `file_rules()`, as JSON) applied to each of `paths` (test hook):
/// (is_source, is_header, is_implicit, skips_dir of its last component, is_system_header).
#[pyfunction]
#[allow(clippy::type_complexity)] // (one tuple per path, what the test compares)
fn _file_rules(
    files_json: &str,
    paths: Vec<String>,
) -> PyResult<Vec<(bool, bool, bool, bool, bool)>> {
    let rules: tree_path::FileRules = serde_json::from_str(files_json)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok(paths
        .iter()
        .map(|p| {
            (
                rules.is_source(p),
                rules.is_header(p),
                rules.is_implicit(p),
                rules.skips_dir(tree_path::basename(p)),
                rules.is_system_header(p),
            )
        })
        .collect())
}

/// rocm.py's `installed_version` on the given data (test hook); raises ValueError when not decidable here.
#[pyfunction]
fn _installed_version(
    environ: Vec<(String, String)>,
    env_names: Vec<String>,
    roots: Vec<String>,
    version_files: Vec<(String, String, String)>,
) -> PyResult<Option<(u64, u64)>> {
    tree_plan::installed_version(&environ, &env_names, &roots, &version_files)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// plan.py's key and file name for a command line's options, and cache.py's `cache_dir()` (test hook).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _plan_name(
    tools_dir: &str,
    hip_version: Option<(u64, u64)>,
    overrides: Option<&str>,
    comments: bool,
    unmapped: bool,
    launch: bool,
    lint: bool,
) -> (String, String, Option<String>) {
    let key = tree_plan::plan_key(
        tools_dir,
        hip_version,
        overrides,
        comments,
        unmapped,
        launch,
        lint,
    );
    let name = tree_plan::entry_name("plan", &key);
    (key, name, tree_plan::cache_dir().ok())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // whether hipify_main runs the per-file pass natively too (else only with a bridge)
    m.add("TREE_NATIVE", true)?;
    // what tools/hipify/plan.py's native_sources() must say for a plan to be run by this module
    m.add("NATIVE_SOURCES", env!("HIPIFY_NATIVE_SOURCES"))?;
    m.add_function(wrap_pyfunction!(hipify_main, m)?)?;
    m.add_function(wrap_pyfunction!(_output_rel, m)?)?;
    m.add_function(wrap_pyfunction!(_paths, m)?)?;
    m.add_function(wrap_pyfunction!(_file_rules, m)?)?;
    m.add_function(wrap_pyfunction!(_installed_version, m)?)?;
    m.add_function(wrap_pyfunction!(_plan_name, m)?)?;
    Ok(())
}

/// `hipify_main`'s run (see there).
fn native_run(
    argv: &[String],
    tools_dir: &str,
    bridge: Option<Py<PyAny>>,
    plan_text: Option<&str>,
) -> Result<tree_cli::Outcome, String> {
    let prep = match tree_cli::prepare(argv, tools_dir, plan_text) {
        Ok(p) => p,
        Err(tree_cli::Early::Fallback(why)) => return Err(why),
        Err(tree_cli::Early::Done(o)) => return Ok(o),
    };
    match bridge {
        Some(obj) => tree_cli::run(&prep, move || {
            Ok(Bridge {
                obj,
                lock: std::sync::Mutex::new(()),
            })
        }),
        None => std::thread::scope(|sc| {
            // the per-file sections are parsed while the tree pass walks and reads the inputs
            let plan = &prep.plan;
            let translator = sc.spawn(move || {
                let known = crate::engine::masks::known_masks(&[]);
                crate::engine::translate::Translator::new(&plan.translate()?, known)
            });
            let lint = sc.spawn(move || plan.lint());
            tree_cli::run(&prep, move || {
                let translator = joined(translator.join())?;
                let lint = joined(lint.join())?;
                Ok(NativeStep::new(translator, &plan.info.files, lint))
            })
        }),
    }
}
