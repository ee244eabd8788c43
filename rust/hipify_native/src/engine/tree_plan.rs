//! The plan file (written by tools/hipify/plan.py into the compiled cache, tools/hipify/cache.py's
//! `cache_dir()`) and the target detection (build_backend/toolchain/rocm.py's `installed_version`, with the
//! data plan.py exports into a small detect file: the environment variables, the fallback roots as Python
//! found them, the version files and their regexes).
//!
//! Both files start with a header line naming every input they were derived from with its stat signature
//! (size, mtime_ns, ctime_ns, inode, device): a changed, added or removed input makes them stale, and the run
//! is then left to Python, which writes them again.

use std::fs;
use std::os::unix::fs::MetadataExt;

use serde::Deserialize;

use super::tree::sha256_hex;
use super::tree_cli::{py_isspace, py_strip};
use super::tree_path::{abs_path, join, pure_path};

pub const PLAN_FORMAT: &str = "monarch-runtime/hipify-plan/v2";
pub const DETECT_FORMAT: &str = "monarch-runtime/hipify-detect/v1";

/// (size, mtime_ns, ctime_ns, inode, device): what changes whenever a file's content does
pub type Sig = (u64, i64, i64, u64, u64);

/// `os.stat(path)`'s signature, or None.
pub fn signature(path: &str) -> Option<Sig> {
    let m = fs::metadata(path).ok()?;
    Some((
        m.size(),
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        m.ino(),
        m.dev(),
    ))
}

#[derive(Deserialize)]
struct Header {
    format: String,
    interface: u32,
    key: String,
    inputs: Vec<(String, Option<Sig>)>,
    /// the fingerprint of the checkout's rust/hipify_native (build.rs), None where it has none
    #[serde(default)]
    native_sources: Option<String>,
}

impl Header {
    fn check(&self, format: &str, key: &str) -> Result<(), String> {
        if self.format != format || self.interface != crate::INTERFACE || self.key != key {
            return Err("a plan of another format, interface or key".into());
        }
        if let Some(sources) = &self.native_sources {
            if sources != env!("HIPIFY_NATIVE_SOURCES") {
                return Err(format!(
                    "this module was built from other sources than the checkout's rust/hipify_native \
                     ({} here, {sources} there): pip install ./rust/hipify_native",
                    env!("HIPIFY_NATIVE_SOURCES")
                ));
            }
        }
        for (path, sig) in &self.inputs {
            if signature(path) != *sig {
                return Err(format!("stale plan: {path} changed"));
            }
        }
        Ok(())
    }
}

/// What the tree pass needs, derived by Python (plan.py's `build`: the plan's first section).
#[derive(Deserialize)]
pub struct PlanInfo {
    /// the state fingerprint (tree.py's `fingerprint`)
    pub fingerprint: String,
    pub hip_version: Option<(u64, u64)>,
    /// `tr.target.sync_define`
    pub sync_define: Option<String>,
    /// the report's `database` (in order)
    pub database: Vec<(String, String)>,
    /// the report's `target` (`Target.describe()`, in order)
    pub target: Vec<(String, String)>,
    /// which files are translated, skipped, headers; which includes are the system's
    pub files: super::tree_path::FileRules,
    /// model.py's KINDS: the order of the summary's and the report's counts
    pub kinds: Vec<String>,
    /// model.py's LAUNCH_STYLES and NAMING_STYLES: the values `--launch` and `--naming` take
    pub choices: Choices,
}

/// The choices of the options whose values the fast path reads (model.py).
#[derive(Deserialize)]
pub struct Choices {
    pub launch: Vec<String>,
    pub naming: Vec<String>,
}

/// A plan file: the tree pass's section parsed, the per-file sections as text (parsed in threads while the
/// tree pass reads its inputs).
pub struct Plan {
    pub info: PlanInfo,
    text: String,
    /// `lint.export_plan()` (JSON `null`: a plan for --no-lint)
    lint: std::ops::Range<usize>,
    /// `Translator.export_plan()`
    translate: std::ops::Range<usize>,
}

impl Plan {
    pub fn lint(&self) -> Result<Option<super::rules::LintPlan>, String> {
        serde_json::from_str(&self.text[self.lint.clone()]).map_err(|e| format!("plan (lint): {e}"))
    }

    pub fn translate(&self) -> Result<super::translate::TranslatePlan, String> {
        super::translate::TranslatePlan::from_json(&self.text[self.translate.clone()])
    }
}

const OFF: &[&str] = &["0", "off", "no", "false"];

fn env(name: &str) -> Result<Option<String>, String> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(v) => v
            .into_string()
            .map(Some)
            .map_err(|_| format!("${name} is not UTF-8")),
    }
}

/// cache.py's `cache_dir()` (Err: off, or not decidable here).
pub fn cache_dir() -> Result<String, String> {
    let given = env("MONARCH_HIPIFY_CACHE")?.unwrap_or_default();
    let given = py_strip(&given);
    if OFF.contains(&given.to_ascii_lowercase().as_str()) {
        return Err("the compiled cache is off".into());
    }
    if !given.is_empty() {
        let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
        let cwd = cwd.to_str().ok_or("the working directory is not UTF-8")?;
        return Ok(abs_path(given, cwd));
    }
    let xdg = env("XDG_CACHE_HOME")?.unwrap_or_default();
    let xdg = py_strip(&xdg);
    let base = if !xdg.is_empty() && xdg.starts_with('/') {
        xdg.to_string()
    } else {
        let home = env("HOME")?.ok_or("$HOME is not set")?;
        let home = home.trim_end_matches('/');
        join(if home.is_empty() { "/" } else { home }, ".cache")
    };
    Ok(join(&join(&base, "monarch-runtime"), "hipify"))
}

/// The key a plan is stored under (plan.py's `plan_key`): what the command line decides.
pub fn plan_key(
    tools_dir: &str,
    hip_version: Option<(u64, u64)>,
    overrides: Option<&str>,
    comments: bool,
    unmapped: bool,
    launch: bool,
    lint: bool,
) -> String {
    let hip = match hip_version {
        Some((a, b)) => format!("{a}.{b}"),
        None => "-".into(),
    };
    let b = |x: bool| if x { "1" } else { "0" };
    format!(
        "{PLAN_FORMAT}\0{tools_dir}\0{hip}\0{}\0{}\0{}\0{}\0{}",
        overrides.unwrap_or(""),
        b(comments),
        b(unmapped),
        b(launch),
        b(lint)
    )
}

/// The file name for `key` (plan.py's `entry_name`).
pub fn entry_name(prefix: &str, key: &str) -> String {
    format!("{prefix}-{}.json", &sha256_hex(key.as_bytes())[..24])
}

/// The plan stored for `key` (`text`: its contents, for tests), when current. Four lines: the header, the
/// tree pass's section, the lint's, the translator's.
pub fn load_plan(cache: &str, key: &str, text: Option<&str>) -> Result<Plan, String> {
    let text = match text {
        Some(t) => t.to_string(),
        None => {
            let path = join(cache, &entry_name("plan", key));
            fs::read_to_string(&path).map_err(|e| format!("no plan {path}: {e}"))?
        }
    };
    let mut lines = Vec::with_capacity(4);
    let mut at = 0;
    for _ in 0..4 {
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        lines.push(at..end);
        at = (end + 1).min(text.len());
    }
    let header: Header =
        serde_json::from_str(&text[lines[0].clone()]).map_err(|e| format!("plan header: {e}"))?;
    header.check(PLAN_FORMAT, key)?;
    let info = serde_json::from_str(&text[lines[1].clone()]).map_err(|e| format!("plan: {e}"))?;
    Ok(Plan {
        info,
        lint: lines[2].clone(),
        translate: lines[3].clone(),
        text,
    })
}

#[derive(Deserialize)]
struct Detect {
    /// ENV (ROCM_HOME, ROCM_PATH)
    env: Vec<String>,
    /// fallback_roots(), in order
    roots: Vec<String>,
    /// VERSION_FILES: (file under the root, major regex, minor regex)
    version_files: Vec<(String, String, String)>,
}

/// tree.py's `detect_hip_version()` (Err: no current detect file, or not decidable here).
pub fn detect(cache: &str, tools_dir: &str) -> Result<Option<(u64, u64)>, String> {
    let key = format!("{DETECT_FORMAT}\0{tools_dir}");
    let path = join(cache, &entry_name("detect", &key));
    let text = fs::read_to_string(&path).map_err(|e| format!("no detect file {path}: {e}"))?;
    let (head, body) = text
        .split_once('\n')
        .ok_or("a detect file without its header")?;
    let header: Header = serde_json::from_str(head).map_err(|e| format!("detect header: {e}"))?;
    header.check(DETECT_FORMAT, &key)?;
    let d: Detect = serde_json::from_str(body).map_err(|e| format!("detect: {e}"))?;
    let mut environ = Vec::new();
    for name in &d.env {
        environ.push((name.clone(), env(name)?.unwrap_or_default()));
    }
    installed_version(&environ, &d.env, &d.roots, &d.version_files)
}

/// rocm.py's `installed_version`: the first of `env_names` set (non-empty) in `environ` is the only root,
/// else `roots` in order; the first root whose version files say a version.
pub fn installed_version(
    environ: &[(String, String)],
    env_names: &[String],
    roots: &[String],
    version_files: &[(String, String, String)],
) -> Result<Option<(u64, u64)>, String> {
    let from_env = env_names.iter().find_map(|name| {
        environ
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| pure_path(v))
    });
    let roots: Vec<String> = match from_env {
        Some(root) => vec![root],
        None => roots.to_vec(),
    };
    let compiled: Vec<(String, regex::bytes::Regex, regex::bytes::Regex)> = version_files
        .iter()
        .map(|(name, major, minor)| {
            let re = |p: &str| {
                regex::bytes::Regex::new(&format!("(?-u){p}"))
                    .map_err(|e| format!("regex {p}: {e}"))
            };
            Ok((name.clone(), re(major)?, re(minor)?))
        })
        .collect::<Result<_, String>>()?;
    for root in &roots {
        if let Some(v) = hip_version(root, &compiled)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// rocm.py's `hip_version(root)`.
fn hip_version(
    root: &str,
    files: &[(String, regex::bytes::Regex, regex::bytes::Regex)],
) -> Result<Option<(u64, u64)>, String> {
    for (name, major, minor) in files {
        let Ok(data) = fs::read(join(root, name)) else {
            continue;
        };
        // Python matches \s and \d on the decoded text (Unicode classes); the ASCII regexes here say the
        // same unless the text has a non-ASCII space or digit, or one of \x1c-\x1f
        let text = String::from_utf8_lossy(&data);
        if text.chars().any(|c| {
            ('\x1c'..='\x1f').contains(&c) || (!c.is_ascii() && (py_isspace(c) || c.is_numeric()))
        }) {
            return Err(format!("{root}/{name}: not decidable here"));
        }
        let num = |re: &regex::bytes::Regex| -> Result<Option<u64>, String> {
            match re.captures(&data) {
                None => Ok(None),
                Some(c) => {
                    let g = c.get(1).ok_or("a version regex without a group")?;
                    let s = std::str::from_utf8(g.as_bytes()).map_err(|e| e.to_string())?;
                    s.parse::<u64>().map(Some).map_err(|e| format!("{s}: {e}"))
                }
            }
        };
        if let (Some(a), Some(b)) = (num(major)?, num(minor)?) {
            return Ok(Some((a, b)));
        }
    }
    Ok(None)
}
