//! tools/hipify/cli.py's `main` (the command lines `_fast_parse` covers), model.py's report and summary, and
//! the fast path's flow: command line -> target -> plan -> tree pass -> report and stderr.

use super::json::{self, Value};
use super::tree::{hipify_tree, Config, Step, TreeError, TreeResult};
use super::tree_fs::strerror;
use super::tree_path::{basename, parent, path_cmp, pure_path};
use super::tree_plan::{self, Choices, Plan, PlanInfo};

/// cli.py's `_Args`.
#[derive(Clone, Debug)]
pub struct Args {
    pub sources: Vec<String>,
    pub output: Option<String>,
    pub report: Option<String>,
    pub hip_version: Option<String>,
    pub strict: bool,
    pub launch: String,
    pub translate_comments: bool,
    pub mappings: Option<String>,
    pub naming: String,
    pub engine: String,
    pub no_lint: bool,
    pub no_unmapped: bool,
    pub jobs: Option<i64>,
    pub quiet: bool,
    pub max_listed: i64,
}

/// Python's `str.isspace()` for one char.
pub fn py_isspace(c: char) -> bool {
    matches!(c, '\t'..='\r' | '\x1c'..='\x1f' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}'
        | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Python's `str.strip()`.
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(py_isspace)
}

/// `int(text)` for what it can decide (ASCII digits, a sign, underscores between digits, surrounding
/// whitespace); None otherwise (then the command line is left to Python).
fn py_int(text: &str) -> Option<i64> {
    let t = py_strip(text);
    if !t.is_ascii() {
        return None;
    }
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let b = digits.as_bytes();
    if b.is_empty() || !b[0].is_ascii_digit() || !b[b.len() - 1].is_ascii_digit() {
        return None;
    }
    let mut value: i64 = 0;
    let mut prev_underscore = false;
    for &c in b {
        if c == b'_' {
            if prev_underscore {
                return None;
            }
            prev_underscore = true;
            continue;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        prev_underscore = false;
        value = value.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg { -value } else { value })
}

/// cli.py's `_fast_parse` (None: a command line it leaves to argparse, so to Python).
pub fn fast_parse(argv: &[String]) -> Option<Args> {
    let mut a = Args {
        sources: Vec::new(),
        output: None,
        report: None,
        hip_version: None,
        strict: false,
        launch: "keep".into(),
        translate_comments: false,
        mappings: None,
        naming: "hipify_torch".into(),
        engine: "builtin".into(),
        no_lint: false,
        no_unmapped: false,
        jobs: None,
        quiet: false,
        max_listed: 20,
    };
    let n = argv.len();
    let mut i = 0;
    let mut sources_done = false;
    while i < n {
        let token = argv[i].as_str();
        i += 1;
        if !token.is_empty() && !token.starts_with('-') {
            if sources_done {
                return None;
            }
            a.sources.push(token.to_string());
            while i < n && !argv[i].is_empty() && !argv[i].starts_with('-') {
                a.sources.push(argv[i].clone());
                i += 1;
            }
            sources_done = true;
            continue;
        }
        match token {
            "--strict" => {
                a.strict = true;
                continue;
            }
            "--translate-comments" => {
                a.translate_comments = true;
                continue;
            }
            "--no-lint" => {
                a.no_lint = true;
                continue;
            }
            "--no-unmapped" => {
                a.no_unmapped = true;
                continue;
            }
            "-q" | "--quiet" => {
                a.quiet = true;
                continue;
            }
            _ => {}
        }
        let (name, eq, mut value) = match token.find('=') {
            Some(at) => (&token[..at], true, token[at + 1..].to_string()),
            None => (token, false, String::new()),
        };
        let known = matches!(
            name,
            "-o" | "--output"
                | "--report"
                | "--hip-version"
                | "--launch"
                | "--mappings"
                | "--naming"
                | "--engine"
                | "-j"
                | "--jobs"
                | "--max-listed"
        );
        if !known || (eq && !name.starts_with("--")) {
            return None;
        }
        if !eq {
            if i >= n || argv[i].starts_with('-') || argv[i].is_empty() {
                return None;
            }
            value = argv[i].clone();
            i += 1;
        }
        match name {
            "-o" | "--output" => a.output = Some(value),
            "--report" => a.report = Some(value),
            "--hip-version" => a.hip_version = Some(value),
            "--mappings" => a.mappings = Some(value),
            "-j" | "--jobs" => a.jobs = Some(py_int(&value)?),
            "--max-listed" => a.max_listed = py_int(&value)?,
            // (the choices are model.py's, in the plan: checked once it is loaded, see `prepare`)
            "--launch" => a.launch = value,
            "--naming" => a.naming = value,
            "--engine" => a.engine = value,
            _ => return None,
        }
    }
    if a.sources.is_empty() || a.output.is_none() {
        return None;
    }
    Some(a)
}

/// Whether the values of `--launch` and `--naming` are among model.py's choices (the plan's): _fast_parse
/// takes only those, argparse rejects the others.
fn offered(args: &Args, choices: &Choices) -> bool {
    choices.launch.contains(&args.launch) && choices.naming.contains(&args.naming)
}

/// tree.py's `parse_hip_version` where it succeeds on ASCII (None: left to Python, which also words the error).
pub fn parse_hip_version(text: &str) -> Option<(u64, u64)> {
    let t = py_strip(text);
    if !t.is_ascii() {
        return None;
    }
    let mut parts = t.split('.');
    let major = parts.next()?;
    let minor = parts.next()?;
    let patch = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if let Some(p) = patch {
        num(p)?;
    }
    Some((num(major)?, num(minor)?))
}

/// What the run prints and returns.
#[derive(Debug)]
pub struct Outcome {
    pub rc: i32,
    /// the report, for `--report -`
    pub stdout: Option<Vec<u8>>,
    pub stderr: String,
}

fn tool_error(msg: &str) -> Outcome {
    Outcome {
        rc: 2,
        stdout: None,
        stderr: format!("error: {msg}\n"),
    }
}

/// Everything decided before the tree pass (no side effect so far).
pub struct Prepared {
    pub args: Args,
    pub cwd: String,
    pub plan: Plan,
    pub workers: usize,
    pub max_input_bytes: usize,
}

/// Not handled here (the Python path runs), or done (an early ToolError).
pub enum Early {
    Fallback(String),
    Done(Outcome),
}

fn cwd() -> Result<String, Early> {
    let dir = std::env::current_dir().map_err(|e| Early::Fallback(format!("getcwd: {e}")))?;
    dir.into_os_string()
        .into_string()
        .map_err(|_| Early::Fallback("the working directory is not UTF-8".into()))
}

/// cli.py's `main` up to `hipify_tree`: the command line, the target, the plan.
pub fn prepare(
    argv: &[String],
    tools_dir: &str,
    plan_text: Option<&str>,
) -> Result<Prepared, Early> {
    if argv.iter().any(|a| a == "--version") {
        return Err(Early::Fallback("--version".into()));
    }
    let args =
        fast_parse(argv).ok_or_else(|| Early::Fallback("a command line for argparse".into()))?;
    if args.engine != "builtin" {
        return Err(Early::Fallback(format!("--engine {}", args.engine)));
    }
    let given = match &args.hip_version {
        Some(text) => Some(
            parse_hip_version(text)
                .ok_or_else(|| Early::Fallback(format!("--hip-version {text}")))?,
        ),
        None => None,
    };
    if let Some(j) = args.jobs {
        if j < 1 {
            return Err(Early::Done(tool_error("jobs must be at least 1")));
        }
    }
    if let Some(r) = &args.report {
        let p = pure_path(r);
        if p != "-" && matches!(basename(&p), "" | "." | "..") {
            return Err(Early::Fallback(format!("--report {r}")));
        }
    }
    let cwd = cwd()?;
    let cache = tree_plan::cache_dir().map_err(Early::Fallback)?;
    let hip_version = match given {
        Some(v) => Some(v),
        None => tree_plan::detect(&cache, tools_dir).map_err(Early::Fallback)?,
    };
    let overrides = args
        .mappings
        .as_ref()
        .map(|m| super::tree_path::abs_path(&pure_path(m), &cwd));
    let key = tree_plan::plan_key(
        tools_dir,
        hip_version,
        overrides.as_deref(),
        args.translate_comments,
        !args.no_unmapped,
        args.launch == "hipLaunchKernelGGL",
        !args.no_lint,
    );
    let plan = tree_plan::load_plan(&cache, &key, plan_text).map_err(Early::Fallback)?;
    if !offered(&args, &plan.info.choices) {
        return Err(Early::Fallback("a command line for argparse".into())); // (it words the error)
    }
    let workers = match args.jobs {
        Some(j) => j.clamp(1, 64) as usize,
        // (at least 2: reading and writing files overlap even on one CPU; at most one per file)
        None => std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16)),
    };
    // (a smaller bound for tests: MONARCH_HIPIFY_NATIVE_MAX_BYTES)
    let max_input_bytes = std::env::var("MONARCH_HIPIFY_NATIVE_MAX_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(super::tree::MAX_INPUT_BYTES);
    Ok(Prepared {
        args,
        cwd,
        plan,
        workers,
        max_input_bytes,
    })
}

fn round4(x: f64) -> f64 {
    format!("{x:.4}").parse().unwrap_or(x)
}

/// `json.dumps(result.to_json(), indent=1) + "\n"`.
pub fn report(result: &TreeResult, plan: &PlanInfo) -> Vec<u8> {
    let pairs = |items: &[(String, String)]| {
        Value::Object(
            items
                .iter()
                .map(|(k, v)| (k.clone(), Value::Str(v.clone())))
                .collect(),
        )
    };
    let mut files: Vec<&(String, String)> = result.outputs.iter().collect();
    files.sort_by(|a, b| path_cmp(&a.0, &b.0).then_with(|| path_cmp(&a.1, &b.1)));
    let mut written: Vec<&String> = result.written.iter().collect();
    written.sort();
    let mut removed: Vec<&String> = result.removed.iter().collect();
    removed.sort();
    let s = |x: &str| Value::Str(x.to_string());
    let value = Value::Object(vec![
        ("schema".into(), s("monarch-runtime/hipify-report/v1")),
        ("engine".into(), s("builtin")),
        (
            "hip_version".into(),
            match plan.hip_version {
                Some((a, b)) => Value::Str(format!("{a}.{b}")),
                None => Value::Null,
            },
        ),
        ("target".into(), pairs(&plan.target)),
        ("database".into(), pairs(&plan.database)),
        (
            "files".into(),
            Value::List(
                files
                    .iter()
                    .map(|(src, dst)| {
                        Value::Object(vec![("source".into(), s(src)), ("output".into(), s(dst))])
                    })
                    .collect(),
            ),
        ),
        (
            "written".into(),
            Value::List(written.iter().map(|w| s(w)).collect()),
        ),
        (
            "removed".into(),
            Value::List(removed.iter().map(|w| s(w)).collect()),
        ),
        (
            "counts".into(),
            Value::Object(
                counts(result, &plan.kinds)
                    .into_iter()
                    .map(|(k, n)| (k, Value::Int(n as i64)))
                    .collect(),
            ),
        ),
        ("blocking".into(), Value::Int(result.blocking() as i64)),
        (
            "findings".into(),
            Value::List(
                result
                    .findings
                    .iter()
                    .map(|f| {
                        let r = &f.row;
                        Value::Object(vec![
                            ("file".into(), s(&f.file)),
                            ("line".into(), Value::Int(r.0)),
                            ("column".into(), Value::Int(r.1)),
                            ("name".into(), s(&r.2)),
                            ("kind".into(), s(&r.3)),
                            ("rule".into(), s(&r.7)),
                            ("reason".into(), s(&r.4)),
                            ("suggestion".into(), s(&r.5)),
                            ("blocking".into(), Value::Bool(r.6)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("seconds".into(), Value::Float(round4(result.seconds))),
    ]);
    let mut out = json::dumps_indent1(&value);
    out.push(b'\n');
    out
}

/// `HipifyResult.counts()`.
fn counts(result: &TreeResult, kinds: &[String]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = kinds.iter().map(|k| (k.clone(), 0)).collect();
    for f in &result.findings {
        match out.iter_mut().find(|(k, _)| *k == f.row.3) {
            Some(slot) => slot.1 += 1,
            None => out.push((f.row.3.clone(), 1)),
        }
    }
    out
}

/// `HipifyResult.summary()`.
pub fn summary(result: &TreeResult, plan: &PlanInfo) -> String {
    let hip_version = plan.hip_version;
    let target = match hip_version {
        Some((a, b)) => format!("{a}.{b}"),
        None => "newest".into(),
    };
    let listed: Vec<String> = counts(result, &plan.kinds)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let counts = if listed.is_empty() {
        "no findings".to_string()
    } else {
        listed.join(", ")
    };
    format!(
        "{} files (HIP {target}): {} written, {} unchanged, {} stale removed; {counts}; {} blocking",
        result.outputs.len(),
        result.written.len(),
        result.unchanged,
        result.removed.len(),
        result.blocking()
    )
}

/// Write the report file as cli.py does (parent directories, a temporary file, a rename).
fn write_report(path: &str, text: &[u8]) -> Result<(), String> {
    let dir = parent(path);
    std::fs::create_dir_all(dir).map_err(|e| strerror(&e))?;
    let name = basename(path);
    let tmp = match path.rfind('/') {
        Some(at) => format!("{}/.{name}.{}.tmp", &path[..at], std::process::id()),
        None => format!(".{name}.{}.tmp", std::process::id()),
    };
    std::fs::write(&tmp, text).map_err(|e| strerror(&e))?;
    std::fs::rename(&tmp, path).map_err(|e| strerror(&e))
}

/// cli.py's `main` from `hipify_tree` on: the tree pass, the report, stderr, the exit status. `make_step`:
/// see `hipify_tree`.
pub fn run<S: Step>(
    prep: &Prepared,
    make_step: impl FnOnce() -> Result<S, TreeError>,
) -> Result<Outcome, String> {
    let a = &prep.args;
    let cfg = Config {
        fingerprint: prep.plan.info.fingerprint.clone(),
        sync_define: prep.plan.info.sync_define.clone(),
        hip_version: prep.plan.info.hip_version,
        lint: !a.no_lint,
        keep_naming: a.naming == "keep",
        workers: prep.workers,
        max_input_bytes: prep.max_input_bytes,
        files: &prep.plan.info.files,
    };
    let output = a.output.as_deref().expect("fast_parse requires -o");
    let result = match hipify_tree(&a.sources, output, &prep.cwd, &cfg, make_step) {
        Ok(r) => r,
        Err(TreeError::Fallback(why)) => return Err(why),
        Err(TreeError::Tool(msg)) => return Ok(tool_error(&msg)),
        Err(TreeError::Io(msg)) => {
            return Ok(Outcome {
                rc: 1,
                stdout: None,
                stderr: format!("error: {msg}\n"),
            })
        }
    };
    let mut stdout = None;
    if let Some(r) = &a.report {
        let text = report(&result, &prep.plan.info);
        let shown = pure_path(r);
        if shown == "-" {
            stdout = Some(text);
        } else if let Err(why) = write_report(&shown, &text) {
            return Ok(tool_error(&format!("cannot write report {shown}: {why}")));
        }
    }
    let mut err = String::new();
    let blocking = result.blocking();
    if !a.quiet {
        let limit = a.max_listed.max(0) as usize;
        let mut listed = 0usize;
        for f in result.findings.iter().filter(|f| f.row.6).take(limit) {
            err.push_str(&f.text());
            err.push('\n');
            listed += 1;
        }
        if blocking > listed {
            err.push_str(&format!(
                "... {} more blocking findings (see --report)\n",
                blocking - listed
            ));
        }
    }
    err.push_str(&format!("hipify: {}\n", summary(&result, &prep.plan.info)));
    let mut rc = 0;
    if a.strict && blocking > 0 {
        err.push_str(&format!(
            "hipify: --strict: {blocking} unportable findings remain\n"
        ));
        rc = 1;
    }
    Ok(Outcome {
        rc,
        stdout,
        stderr: err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_like_cli() {
        let a = fast_parse(&v(&[
            "src", "-o", "out", "-q", "--jobs=2", "--naming", "keep",
        ]))
        .unwrap();
        assert_eq!(a.sources, v(&["src"]));
        assert_eq!(a.jobs, Some(2));
        assert!(a.quiet);
        assert!(fast_parse(&v(&["src", "-o", "out", "x"])).is_none());
        assert!(fast_parse(&v(&["src", "-o=out"])).is_none());
        // an unknown choice is parsed, and refused once the plan's choices are known (`prepare`)
        let choices = Choices {
            launch: v(&["keep", "hipLaunchKernelGGL"]),
            naming: v(&["hipify_torch", "keep"]),
        };
        let bad = fast_parse(&v(&["src", "--launch", "bad", "-o", "o"])).unwrap();
        assert!(!offered(&bad, &choices));
        let bad = fast_parse(&v(&["src", "--naming", "flat", "-o", "o"])).unwrap();
        assert!(!offered(&bad, &choices));
        assert!(offered(&a, &choices));
        assert!(fast_parse(&v(&["src"])).is_none());
        assert_eq!(py_int(" +1_0 "), Some(10));
        assert_eq!(py_int("1__0"), None);
        assert_eq!(parse_hip_version(" 6.2.1 "), Some((6, 2)));
        assert_eq!(parse_hip_version("6"), None);
    }
}
