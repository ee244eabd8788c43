//! tools/hipify/tree.py's `hipify_tree` in Rust: walk, per-file pass (in threads), incremental reuse, the
//! project-mask pass, include resolution, the lines added at the top of files, the naming fixpoint, writing,
//! stale-output removal and the state file. cli.py's command line and model.py's report/summary are in
//! `tree_cli`; the plan file and target detection in `tree_plan`.
//!
//! The per-file work is behind [`Step`] (tree.py's `_process` and `project_masks`): the native one
//! (`tree_native`) or, for parity tests, one that calls tree.py's own `_process` (`crate::py_tree`).
//!
//! Memory: unlike tree.py (RETAIN_BYTES), every input and translated file is kept until it is written: a
//! run holds about twice the tree's size (30 MB for a 10 MB tree). Results are the same either way (tree.py
//! re-translates what it evicted, which gives the same bytes). A tree whose inputs exceed
//! [`Config::max_input_bytes`] is left to the Python path (before anything is written), whose memory stays
//! bounded whatever the tree's size.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::tree_fs::{strerror, walk, Source, Writer};
use super::tree_path::{
    basename, dirname, is_within, normjoin_into, output_rel, pure_path, relative, FileRules,
};
use super::tree_state::{dump_state, parse_state, Prev, Record, STATE_FILE};
pub use super::tree_state::{EditRow, FindingRow, IncludeRow};
use super::types::facts;
use crate::scan::FxMap;

/// Why a run did not finish here.
#[derive(Debug)]
pub enum TreeError {
    /// not handled here (before any side effect): the Python path runs instead, with the same result
    Fallback(String),
    /// a user's mistake: tools.errors.ToolError's message (`error: ...`, exit 2)
    Tool(String),
    /// an I/O failure while writing (Python raises an OSError there)
    Io(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Translate,
    Copy,
    Error,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Translate => "translate",
            Mode::Copy => "copy",
            Mode::Error => "error",
        }
    }
}

/// One file's result (tree.py's `_Processed`).
#[derive(Clone, Debug)]
pub struct Processed {
    pub mode: Mode,
    /// the translated (or copied) bytes; None: known from the previous run's record
    pub data: Option<Vec<u8>>,
    pub sha: String,
    pub changed: bool,
    pub findings: Vec<FindingRow>,
    pub includes: Vec<IncludeRow>,
    pub defines: Vec<String>,
    pub error: String,
    pub facts: i64,
    pub insert_at: i64,
    pub insert_line: i64,
    pub unresolved: Vec<String>,
}

impl Processed {
    pub fn new(mode: Mode) -> Processed {
        Processed {
            mode,
            data: Some(Vec::new()),
            sha: String::new(),
            changed: false,
            findings: Vec::new(),
            includes: Vec::new(),
            defines: Vec::new(),
            error: String::new(),
            facts: 0,
            insert_at: 0,
            insert_line: 1,
            unresolved: Vec::new(),
        }
    }
}

/// tree.py's per-file work.
pub trait Step: Sync {
    /// a project-mask table (`masks.merge_header_masks`'s result)
    type Masks: Sync;
    /// `_process(path, translate, key (+ masks), lint)` on `data`, the file's bytes (read by the tree pass)
    fn process(
        &self,
        path: &str,
        data: &[u8],
        translate: bool,
        masks: Option<&Self::Masks>,
        lint: bool,
    ) -> Result<Processed, TreeError>;
    /// `project_masks(paths, wanted)`: `headers` are the readable files among `paths` with a header suffix
    /// (with their bytes). Returns the table and the names it defines.
    fn project_masks(
        &self,
        paths: &[&str],
        headers: &[(&str, &[u8])],
        wanted: &BTreeSet<String>,
    ) -> Result<(Self::Masks, HashSet<String>), TreeError>;
}

/// What the tree pass needs besides the per-file step (from the plan and the options).
pub struct Config<'a> {
    /// the state fingerprint (`f"{code}/{db}/{key!r}/lint={lint}/engine=builtin"`)
    pub fingerprint: String,
    /// the target's warp-sync macro (`tr.target.sync_define`)
    pub sync_define: Option<String>,
    /// the target (`tr.hip_version`)
    pub hip_version: Option<(u64, u64)>,
    pub lint: bool,
    /// `naming == "keep"`
    pub keep_naming: bool,
    /// threads for the per-file work and the writes (>= 1)
    pub workers: usize,
    /// the most input bytes a run holds (more: [`TreeError::Fallback`], see the module's doc)
    pub max_input_bytes: usize,
    /// the plan's file tables (sources, skipped directories, headers, system includes)
    pub files: &'a FileRules,
}

/// An I/O failure while writing, as cli.py words it (`write_error`).
fn io_error(out_dir: &str, path: &str, e: &std::io::Error) -> TreeError {
    TreeError::Io(format!(
        "cannot write the output into {out_dir}: {} ({path}). Check that the output directory can be created \
         and written there, or choose another with -o.",
        strerror(e)
    ))
}

/// [`Config::max_input_bytes`]' default: a run then holds ~0.6 GB at most.
pub const MAX_INPUT_BYTES: usize = 256 << 20;

/// A finding of the result (model.py's `Finding`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub row: FindingRow,
}

impl Finding {
    /// `Finding.__str__`
    pub fn text(&self) -> String {
        let r = &self.row;
        let rule = if r.7.is_empty() {
            String::new()
        } else {
            format!("[{}] ", r.7)
        };
        format!(
            "{}:{}:{}: {}: {}{}: {}",
            self.file, r.0, r.1, r.3, rule, r.2, r.4
        )
    }
}

/// What a run did (model.py's `HipifyResult`, less what the plan gives).
#[derive(Debug, Default)]
pub struct TreeResult {
    /// (source, output), one per source file that has an output
    pub outputs: Vec<(String, String)>,
    /// sorted as `HipifyResult` sorts them
    pub findings: Vec<Finding>,
    pub written: Vec<String>,
    pub unchanged: usize,
    pub removed: Vec<String>,
    pub seconds: f64,
}

impl TreeResult {
    pub fn blocking(&self) -> usize {
        self.findings.iter().filter(|f| f.row.6).count()
    }
}

/// `f(i)` for `i in 0..n` on up to `workers` threads, results in order.
pub fn parallel_map<T: Send, F: Fn(usize) -> T + Sync>(n: usize, workers: usize, f: F) -> Vec<T> {
    let workers = workers.min(n);
    if workers <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut local = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        local.push((i, f(i)));
                    }
                    local
                })
            })
            .collect();
        for h in handles {
            for (i, t) in h.join().expect("tree pass worker panicked") {
                slots[i] = Some(t);
            }
        }
    });
    slots.into_iter().map(|t| t.expect("every index")).collect()
}

pub fn sha256_hex(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// Python's `data[:start] + text + data[end:]`.
fn splice(data: &[u8], start: i64, end: i64, text: &[u8]) -> Vec<u8> {
    let len = data.len() as i64;
    let clamp = |i: i64| -> usize {
        if i < 0 {
            (len + i).max(0) as usize
        } else {
            i.min(len) as usize
        }
    };
    let (s, e) = (clamp(start), clamp(end));
    let mut out = Vec::with_capacity(s + text.len() + data.len().saturating_sub(e));
    out.extend_from_slice(&data[..s]);
    out.extend_from_slice(text);
    out.extend_from_slice(&data[e..]);
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Local,
    Root,
    Dir,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hdr {
    Runtime,
    Api,
}

impl Hdr {
    fn bytes(self) -> &'static str {
        match self {
            Hdr::Runtime => "hip/hip_runtime.h",
            Hdr::Api => "hip/hip_runtime_api.h",
        }
    }
}

/// Output names (tree.py's `out_info`), memoised per (source, changed).
struct OutNames<'a> {
    root: &'a str,
    keep: bool,
    srcs: &'a [Source],
    memo: Vec<[Option<String>; 2]>,
}

impl OutNames<'_> {
    fn get(&mut self, i: usize, changed: bool) -> &str {
        let slot = &mut self.memo[i][usize::from(changed)];
        if slot.is_none() {
            *slot = Some(format!(
                "{}/{}",
                self.root,
                output_rel(&self.srcs[i].rel, changed, self.keep)
            ));
        }
        slot.as_deref().expect("just set")
    }
}

fn new_spelling(
    names: &mut OutNames<'_>,
    changed: &[bool],
    includer: usize,
    target: usize,
    how: How,
    spelling: &str,
) -> String {
    let t = names.get(target, changed[target]).to_string();
    match how {
        How::Dir => {
            let keep = spelling.matches('/').count() + 1;
            let parts: Vec<&str> = t.split('/').collect();
            parts[parts.len().saturating_sub(keep)..].join("/")
        }
        How::Local => {
            let base = dirname(names.get(includer, changed[includer])).to_string();
            relative(&t, &base)
        }
        How::Root => relative(&t, names.root),
    }
}

/// tree.py's `_additions`: per source, (the warp-sync macro to define, the runtime header to include).
fn additions(
    srcs: &[Source],
    procs: &[Processed],
    links: &[Vec<usize>],
    sync_define: Option<&str>,
) -> Vec<Option<(Option<String>, Option<Hdr>)>> {
    let n = srcs.len();
    let fact: Vec<i64> = procs
        .iter()
        .map(|p| {
            if p.mode == Mode::Translate {
                p.facts
            } else {
                0
            }
        })
        .collect();
    let bit = |b: u32| i64::from(b);

    fn closure(
        start: usize,
        b: i64,
        fact: &[i64],
        links: &[Vec<usize>],
        extra: &dyn Fn(usize) -> bool,
    ) -> bool {
        if fact[start] & b != 0 || extra(start) {
            return true;
        }
        if links[start].is_empty() {
            return false; // (most files: no project include)
        }
        let mut seen: HashSet<usize> = HashSet::from([start]);
        let mut todo = vec![start];
        while let Some(k) = todo.pop() {
            if fact[k] & b != 0 || extra(k) {
                return true;
            }
            for &nxt in &links[k] {
                if seen.insert(nxt) {
                    todo.push(nxt);
                }
            }
        }
        false
    }

    struct Walk<'a> {
        srcs: &'a [Source],
        fact: &'a [i64],
        links: &'a [Vec<usize>],
        gets: Vec<Option<Option<Hdr>>>,
        visiting: Vec<bool>,
    }

    fn runtime_for(w: &mut Walk<'_>, k: usize) -> Option<Hdr> {
        if let Some(g) = w.gets[k] {
            return g;
        }
        if w.visiting[k] {
            return None;
        }
        w.visiting[k] = true;
        for j in 0..w.links[k].len() {
            let nxt = w.links[k][j];
            runtime_for(w, nxt);
        }
        let f = w.fact[k];
        let gets = &w.gets;
        let has_runtime = closure(k, i64::from(facts::HAS_RUNTIME), w.fact, w.links, &|n| {
            gets[n] == Some(Some(Hdr::Runtime))
        });
        let uses = i64::from(facts::USES_DEVICE | facts::USES_API);
        // a translation unit nvcc compiled that uses CUDA or project headers (cuda_runtime.h came first), or
        // another file with device code and no runtime include of its own or through its headers
        let unit = w.srcs[k].path.ends_with(".cu")
            && f & i64::from(facts::RUNTIME_FIRST) == 0
            && (f & uses != 0 || !w.links[k].is_empty());
        let header = if unit || (f & i64::from(facts::USES_DEVICE) != 0 && !has_runtime) {
            Some(Hdr::Runtime)
        } else if f & i64::from(facts::USES_API) != 0 && !has_runtime {
            let api = i64::from(facts::HAS_RUNTIME_API | facts::HAS_RUNTIME);
            if closure(k, api, w.fact, w.links, &|n| {
                matches!(gets[n], Some(Some(_)))
            }) {
                None
            } else {
                Some(Hdr::Api)
            }
        } else {
            None
        };
        w.gets[k] = Some(header);
        w.visiting[k] = false;
        header
    }

    let mut w = Walk {
        srcs,
        fact: &fact,
        links,
        gets: vec![None; n],
        visiting: vec![false; n],
    };
    let mut out = vec![None; n];
    for k in 0..n {
        let header = runtime_for(&mut w, k);
        let mut define = None;
        if let Some(d) = sync_define {
            if fact[k] & bit(facts::DEFINES_SYNC) == 0
                && closure(k, bit(facts::USES_SYNC), &fact, links, &|_| false)
            {
                define = Some(d.to_string());
            }
        }
        if header.is_some() || define.is_some() {
            out[k] = Some((define, header));
        }
    }
    out
}

/// tree.py's `_addition_findings`.
fn addition_findings(
    path: &str,
    line: i64,
    define: Option<&str>,
    header: Option<Hdr>,
    hip_version: Option<(u64, u64)>,
) -> Vec<Finding> {
    let target = match hip_version {
        Some((a, b)) => format!("{a}.{b}"),
        None => "(newest)".to_string(),
    };
    let mut found = Vec::new();
    if let Some(d) = define {
        found.push(Finding {
            file: path.to_string(),
            row: FindingRow(
                line,
                1,
                d.to_string(),
                "note".into(),
                format!(
                    "#define {d} added before the HIP headers: HIP {target} declares the warp *_sync \
                     builtins and __activemask only with it (amd_warp_sync_functions.h); this file or a \
                     header it includes uses them"
                ),
                format!("none needed; or build with -D{d}"),
                false,
                "warp-sync-define".into(),
            ),
        });
    }
    if let Some(h) = header {
        let name = h.bytes();
        let why = if h == Hdr::Runtime {
            "device code"
        } else {
            "HIP runtime API names"
        };
        found.push(Finding {
            file: path.to_string(),
            row: FindingRow(
                line,
                1,
                name.to_string(),
                "note".into(),
                format!(
                    "#include <{name}> added: the file uses {why} without including it (nvcc includes \
                     the CUDA runtime implicitly; HIP-Clang does not)"
                ),
                "none needed; or include it in the CUDA source".into(),
                false,
                "runtime-include".into(),
            ),
        });
    }
    found
}

fn from_entry(e: &super::tree_state::Entry, sha: String) -> Processed {
    Processed {
        mode: if e.mode == "translate" {
            Mode::Translate
        } else {
            Mode::Copy
        },
        data: None,
        sha,
        changed: e.changed,
        findings: e.findings.clone(),
        includes: e.includes.clone(),
        defines: e.defines.clone(),
        error: String::new(),
        facts: e.facts.0,
        insert_at: e.facts.1,
        insert_line: e.facts.2,
        unresolved: e.unresolved.clone(),
    }
}

/// A write of the output loop: its output, and what goes in it.
struct Job {
    src: usize,
    dst: String,
    /// the translated bytes (None: from the previous run's record: translated again here)
    data: Option<Vec<u8>>,
    edits: Vec<(i64, i64, Vec<u8>)>,
}

/// `hipify_tree(sources, out_dir, options)`: `sources` as given on the command line, `cwd` the process's
/// working directory (`os.getcwd()`). `make_step` gives the per-file step once the inputs are read (it may
/// be built in another thread meanwhile).
pub fn hipify_tree<S: Step>(
    sources: &[String],
    out_dir: &str,
    cwd: &str,
    cfg: &Config<'_>,
    make_step: impl FnOnce() -> Result<S, TreeError>,
) -> Result<TreeResult, TreeError> {
    let started = Instant::now();
    let out_abs = super::tree_path::abs_path(&pure_path(out_dir), cwd);
    let (srcs, roots) = walk(sources, &out_abs, cwd, cfg.files)?;
    if fs::symlink_metadata(&out_abs).is_ok() && !fs::metadata(&out_abs).is_ok_and(|m| m.is_dir()) {
        // (Python fails there with an OSError's traceback)
        return Err(TreeError::Fallback(format!(
            "{out_abs} exists and is not a directory"
        )));
    }
    let n = srcs.len();
    let mut by_key: FxMap<&str, usize> = FxMap::default();
    for (i, s) in srcs.iter().enumerate() {
        if by_key.insert(s.path.as_str(), i).is_some() {
            return Err(TreeError::Fallback(format!("{} given twice", s.path)));
        }
    }

    let state_path = format!("{out_abs}/{STATE_FILE}");
    let state_bytes = match fs::read(&state_path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) if e.raw_os_error() == Some(20) => None, // ENOTDIR: no state there either
        Err(e) => return Err(TreeError::Fallback(format!("{state_path}: {e}"))),
    };
    let previous = parse_state(state_bytes.as_deref()).map_err(TreeError::Fallback)?;
    drop(state_bytes);
    let prev_files = &previous.files;
    let cache_ok = previous.fingerprint.as_deref() == Some(cfg.fingerprint.as_str());

    // Read and hash every input; reuse the previous result when the content is unchanged.
    enum Read {
        Failed(String),
        Cached(Box<Processed>),
        Todo(String),
        TooBig,
    }
    let held = AtomicUsize::new(0);
    let reads: Vec<(Option<Vec<u8>>, Read)> = parallel_map(n, cfg.workers, |i| {
        let s = &srcs[i];
        if held.load(Ordering::Relaxed) > cfg.max_input_bytes {
            return (None, Read::TooBig);
        }
        let data = match fs::read(&s.path) {
            Ok(d) => d,
            Err(err) => {
                return (
                    None,
                    Read::Failed(format!("cannot read: {}", strerror(&err))),
                )
            }
        };
        if held.fetch_add(data.len(), Ordering::Relaxed) + data.len() > cfg.max_input_bytes {
            return (None, Read::TooBig);
        }
        let sha = sha256_hex(&data);
        if cache_ok {
            if let Some(Prev::Entry(e)) = prev_files.get(&s.path) {
                if (e.mode == "translate" || e.mode == "copy") && sha == e.sha {
                    return (Some(data), Read::Cached(Box::new(from_entry(e, sha))));
                }
            }
        }
        (Some(data), Read::Todo(sha))
    });
    let mut inputs: Vec<Option<Vec<u8>>> = Vec::with_capacity(n);
    let mut procs: Vec<Processed> = Vec::with_capacity(n);
    let mut todo: Vec<(usize, String)> = Vec::new();
    if reads.iter().any(|(_, r)| matches!(r, Read::TooBig)) {
        return Err(TreeError::Fallback(format!(
            "the inputs exceed {} MiB: the Python path bounds its memory (RETAIN_BYTES)",
            cfg.max_input_bytes >> 20
        )));
    }
    for (i, (data, read)) in reads.into_iter().enumerate() {
        inputs.push(data);
        procs.push(match read {
            Read::TooBig => unreachable!("handled above"),
            Read::Failed(why) => {
                let mut p = Processed::new(Mode::Error);
                p.error = why;
                p
            }
            Read::Cached(p) => *p,
            Read::Todo(sha) => {
                todo.push((i, sha));
                Processed::new(Mode::Translate) // (replaced below)
            }
        });
    }
    let mut any_fresh = todo.len() + procs.iter().filter(|p| p.mode == Mode::Error).count() > 0;

    // Translate the new and changed files, the biggest first (the threads finish together).
    let step = make_step()?;
    let step = &step;
    todo.sort_by_key(|(i, _)| std::cmp::Reverse(inputs[*i].as_ref().map_or(0, Vec::len)));
    let done = parallel_map(todo.len(), cfg.workers, |j| {
        let i = todo[j].0;
        let data = inputs[i].as_deref().unwrap_or(b"");
        step.process(
            &srcs[i].path,
            data,
            cfg.files.is_source(&srcs[i].path),
            None,
            cfg.lint,
        )
    });
    for ((i, sha), p) in todo.into_iter().zip(done) {
        let mut p = p?;
        p.sha = sha;
        if p.unresolved.is_empty() && !cfg.files.is_header(&srcs[i].path) {
            // translated: needed again only by the project-mask pass (headers, files it may redo)
            inputs[i] = None;
        }
        procs[i] = p;
    }

    // The project-mask pass (_project_mask_pass).
    let wanted: BTreeSet<String> = procs
        .iter()
        .flat_map(|p| p.unresolved.iter().cloned())
        .collect();
    if !wanted.is_empty() {
        let paths: Vec<&str> = srcs.iter().map(|s| s.path.as_str()).collect();
        let headers: Vec<(&str, &[u8])> = srcs
            .iter()
            .zip(&inputs)
            .filter(|(s, _)| cfg.files.is_header(&s.path))
            .filter_map(|(s, d)| d.as_deref().map(|d| (s.path.as_str(), d)))
            .collect();
        let (table, found) = step.project_masks(&paths, &headers, &wanted)?;
        let redo: Vec<usize> = (0..n)
            .filter(|&i| {
                procs[i].mode == Mode::Translate
                    && procs[i].unresolved.iter().any(|u| found.contains(u))
            })
            .collect();
        if !redo.is_empty() {
            any_fresh = true;
            let again = parallel_map(redo.len(), cfg.workers, |j| {
                let i = redo[j];
                let data = inputs[i].as_deref().unwrap_or(b"");
                step.process(&srcs[i].path, data, true, Some(&table), cfg.lint)
            });
            for (j, r) in again.into_iter().enumerate() {
                let mut r = r?;
                let i = redo[j];
                r.unresolved = std::mem::take(&mut procs[i].unresolved);
                r.sha = std::mem::take(&mut procs[i].sha);
                procs[i] = r;
            }
        }
    }

    let mut changed: Vec<bool> = procs
        .iter()
        .map(|p| p.mode == Mode::Translate && p.changed)
        .collect();
    let mut names = OutNames {
        root: &out_abs,
        keep: cfg.keep_naming,
        srcs: &srcs,
        memo: vec![[None, None]; n],
    };

    // Resolve project includes: includer dir first ("..."), then every source directory root, then (an
    // include directory hipify is not told about) the one file whose path ends in the spelling.
    let mut by_name: Option<HashMap<&str, Vec<usize>>> = None;
    let mut resolved: Vec<Vec<(usize, usize, How)>> = vec![Vec::new(); n];
    let (mut joined, mut stack) = (String::new(), Vec::new());
    for (i, s) in srcs.iter().enumerate() {
        let p = &procs[i];
        if p.includes.is_empty() {
            continue;
        }
        let own_dir = super::tree_path::parent(&s.path);
        let mut bases: Vec<(&str, bool)> = Vec::new();
        if s.is_dir_root {
            bases.push((s.root.as_str(), false));
        }
        bases.extend(roots.iter().map(|r| (r.as_str(), false)));
        for (idx, inc) in p.includes.iter().enumerate() {
            let spelling = inc.2.as_str();
            let mut hit = None;
            let local = if inc.3 { None } else { Some((own_dir, true)) };
            for (base, is_local) in local.into_iter().chain(bases.iter().copied()) {
                normjoin_into(&mut joined, &mut stack, base, spelling);
                if let Some(&t) = by_key.get(joined.as_str()) {
                    if procs[t].mode != Mode::Error {
                        hit = Some((idx, t, if is_local { How::Local } else { How::Root }));
                        break;
                    }
                }
            }
            if hit.is_none() {
                // by_suffix
                let parts: Vec<&str> = spelling.split('/').collect();
                if !parts
                    .iter()
                    .any(|p| *p == ".." || *p == "." || p.is_empty())
                    && !cfg.files.is_system_header(spelling)
                {
                    let table = by_name.get_or_insert_with(|| {
                        let mut m: HashMap<&str, Vec<usize>> = HashMap::new();
                        for (j, src) in srcs.iter().enumerate() {
                            m.entry(basename(&src.path)).or_default().push(j);
                        }
                        m
                    });
                    let tail = format!("/{spelling}");
                    let hits: Vec<usize> = table
                        .get(parts[parts.len() - 1])
                        .map(|v| {
                            v.iter()
                                .copied()
                                .filter(|&c| srcs[c].path.ends_with(&tail))
                                .collect()
                        })
                        .unwrap_or_default();
                    if hits.len() == 1 && procs[hits[0]].mode != Mode::Error && hits[0] != i {
                        hit = Some((idx, hits[0], How::Dir));
                    }
                }
            }
            if let Some(h) = hit {
                resolved[i].push(h);
            }
        }
    }

    let links: Vec<Vec<usize>> = resolved
        .iter()
        .map(|v| v.iter().map(|&(_, t, _)| t).collect())
        .collect();
    let added = additions(&srcs, &procs, &links, cfg.sync_define.as_deref());
    for (i, a) in added.iter().enumerate() {
        if a.is_some() {
            changed[i] = true;
        }
    }

    // Fixpoint: rewriting an include changes the includer, which may rename it (x.h -> x_hip.h), ...
    let mut moved = true;
    while moved {
        moved = false;
        for i in 0..n {
            if resolved[i].is_empty() || changed[i] {
                continue;
            }
            for &(idx, target, how) in &resolved[i] {
                let inc = &procs[i].includes[idx];
                if inc.4 || new_spelling(&mut names, &changed, i, target, how, &inc.2) != inc.2 {
                    changed[i] = true;
                    moved = true;
                    break;
                }
            }
        }
    }

    // The output loop: decisions first (no side effect before a ToolError or a fallback), then the writes.
    let mut findings: Vec<Finding> = Vec::new();
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut claimed: FxMap<String, usize> = FxMap::default();
    let defined: HashSet<String> = procs
        .iter()
        .flat_map(|p| p.defines.iter().cloned())
        .collect();
    let mut unchanged = 0usize;
    let mut remade = 0usize;
    let mut edits_of: Vec<Vec<EditRow>> = vec![Vec::new(); n];
    let mut out_of: Vec<Option<String>> = vec![None; n];
    let mut stat_of: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut jobs: Vec<Job> = Vec::new(); // (mutable: the writes take their bytes)
    let mut stop: Option<String> = None;
    let writer = Writer::new(&out_abs);
    for i in 0..n {
        let s = &srcs[i];
        let p = &mut procs[i];
        for f in &p.findings {
            if f.3 == "unmapped" && defined.contains(f.2.as_str()) {
                continue; // the project's own macro, not a CUDA API name
            }
            findings.push(Finding {
                file: s.path.clone(),
                row: f.clone(),
            });
        }
        if p.mode == Mode::Error {
            findings.push(Finding {
                file: s.path.clone(),
                row: FindingRow(
                    0,
                    0,
                    basename(&s.path).to_string(),
                    "error".into(),
                    p.error.clone(),
                    "check the file's permissions".into(),
                    true,
                    "unreadable".into(),
                ),
            });
            continue;
        }
        let dst = names.get(i, changed[i]).to_string();
        if by_key.contains_key(dst.as_str()) {
            stop = Some(format!(
                "output {dst} would overwrite a source file: choose another output directory"
            ));
            break;
        }
        if let Some(&other) = claimed.get(&dst) {
            findings.push(Finding {
                file: s.path.clone(),
                row: FindingRow(
                    0,
                    0,
                    basename(&s.path).to_string(),
                    "error".into(),
                    format!("output {dst} is also the output of {}", srcs[other].path),
                    "rename one of the two sources".into(),
                    true,
                    "output-collision".into(),
                ),
            });
            continue;
        }
        claimed.insert(dst.clone(), i);
        let mut edits: Vec<EditRow> = Vec::new();
        for &(idx, target, how) in &resolved[i] {
            let inc = &p.includes[idx];
            let new = new_spelling(&mut names, &changed, i, target, how, &inc.2);
            if new != inc.2 || inc.4 {
                edits.push(EditRow(inc.0, inc.1, new));
            }
        }
        if let Some((define, header)) = &added[i] {
            let text = super::insert::render(
                define.as_deref().map(str::as_bytes),
                header.map(|h| h.bytes().as_bytes()),
                p.facts & i64::from(facts::CRLF) != 0,
            );
            let text = String::from_utf8(text).expect("rendered lines are ASCII");
            edits.push(EditRow(p.insert_at, p.insert_at, text));
            findings.extend(addition_findings(
                &s.path,
                p.insert_line,
                define.as_deref(),
                *header,
                cfg.hip_version,
            ));
        }
        edits.sort_by(|a, b| b.cmp(a));
        outputs.push((s.path.clone(), dst.clone()));
        let mut edit_bytes = Vec::with_capacity(edits.len());
        for e in &edits {
            match super::types::from_latin1(&e.2) {
                Some(b) => edit_bytes.push((e.0, e.1, b)),
                None => {
                    return Err(TreeError::Fallback(format!(
                        "an include spelling beyond Latin-1: {}",
                        e.2
                    )))
                }
            }
        }
        out_of[i] = Some(dst.clone());
        if p.data.is_none() {
            if let Some(Prev::Entry(prev)) = prev_files.get(&s.path) {
                if prev.out == dst && prev.edits == edits {
                    if let Some(st) = writer.stat(&dst) {
                        if Some(st.0) == prev.out_size && Some(st.1) == prev.out_mtime_ns {
                            unchanged += 1; // same input, same options, same output file: nothing to do
                            stat_of[i] = Some(st);
                            edits_of[i] = edits;
                            continue;
                        }
                    }
                }
            }
            remade += 1;
        }
        edits_of[i] = edits;
        jobs.push(Job {
            src: i,
            dst,
            data: p.data.take(),
            edits: edit_bytes,
        });
    }

    // The writes (in threads): directories first, one mkdir each.
    let write_one = |job: &mut Job| -> Result<(bool, Option<(i64, i64)>), TreeError> {
        let i = job.src;
        let mut data = match job.data.take() {
            Some(d) => d,
            None => {
                let input = inputs[i].as_deref().unwrap_or(b"");
                let again = step.process(
                    &srcs[i].path,
                    input,
                    procs[i].mode == Mode::Translate,
                    None,
                    false,
                )?;
                again.data.unwrap_or_default()
            }
        };
        for (start, end, text) in &job.edits {
            data = splice(&data, *start, *end, text);
        }
        if writer.same_content(&job.dst, &data) {
            return Ok((false, writer.stat(&job.dst)));
        }
        let place = writer.place(&job.dst);
        match writer.write(&place, &data) {
            Ok(st) => Ok((true, st)),
            Err(e) => Err(io_error(&out_abs, &place, &e)),
        }
    };
    let mut dirs: Vec<String> = jobs
        .iter()
        .map(|j| dirname(&writer.place(&j.dst)).to_string())
        .collect();
    dirs.sort_unstable();
    dirs.dedup();
    let fail = |e: TreeError| -> TreeError {
        let _ = writer.finish(false);
        e
    };
    if !jobs.is_empty() {
        writer
            .make_dirs(&dirs)
            .map_err(|e| fail(io_error(&out_abs, &dirs[0], &e)))?;
    }
    let slots: Vec<std::sync::Mutex<Option<&mut Job>>> = jobs
        .iter_mut()
        .map(|j| std::sync::Mutex::new(Some(j)))
        .collect();
    let done = parallel_map(slots.len(), cfg.workers, |k| {
        let mut guard = slots[k].lock().expect("job lock");
        let job = guard.take().expect("each job once");
        (job.src, write_one(job))
    });
    let mut written: Vec<String> = Vec::new();
    for (i, r) in done {
        let (was_written, st) = r.map_err(fail)?;
        if was_written {
            written.push(out_of[i].clone().expect("an output"));
        } else {
            unchanged += 1;
        }
        stat_of[i] = st;
    }
    if let Some(msg) = stop {
        let _ = writer.finish(false);
        return Err(TreeError::Tool(msg));
    }

    // Stale outputs: recorded by the previous run into this directory, not produced now.
    let current: HashSet<&str> = outputs.iter().map(|(_, d)| d.as_str()).collect();
    let old_outputs: BTreeSet<&str> = prev_files
        .values()
        .filter_map(|v| match v {
            Prev::Entry(e) if !e.out.is_empty() => Some(e.out.as_str()),
            _ => None,
        })
        .collect();
    let mut removed: Vec<String> = Vec::new();
    for old in old_outputs {
        let old_path = pure_path(old);
        if current.contains(old)
            || !is_within(&old_path, &out_abs)
            || by_key.contains_key(old_path.as_str())
        {
            continue;
        }
        if fs::remove_file(&old_path).is_err() {
            continue;
        }
        let mut parent = super::tree_path::parent(&old_path).to_string();
        removed.push(old_path);
        while parent != out_abs && is_within(&parent, &out_abs) {
            if fs::remove_dir(&parent).is_err() {
                break;
            }
            parent = super::tree_path::parent(&parent).to_string();
        }
    }

    // The record.
    let mut records: BTreeMap<&str, Record<'_>> = BTreeMap::new();
    let mut size_hint = 256;
    for i in 0..n {
        let Some(out) = out_of[i].as_deref() else {
            continue;
        };
        let p = &procs[i];
        size_hint += 256 + out.len() + p.findings.len() * 160 + p.includes.len() * 40;
        records.insert(
            srcs[i].path.as_str(),
            Record {
                sha: &p.sha,
                mode: p.mode.as_str(),
                changed: p.changed,
                findings: &p.findings,
                includes: &p.includes,
                defines: &p.defines,
                facts: (p.facts, p.insert_at, p.insert_line),
                unresolved: &p.unresolved,
                out,
                edits: &edits_of[i],
                out_stat: stat_of[i],
            },
        );
    }
    let nothing_new = cache_ok
        && !any_fresh
        && remade == 0
        && written.is_empty()
        && removed.is_empty()
        && records.len() == prev_files.len()
        && records
            .keys()
            .zip(prev_files.keys())
            .all(|(a, b)| *a == b.as_str());
    if !nothing_new {
        let state = dump_state(
            &cfg.fingerprint,
            records.iter().map(|(k, r)| (*k, r)),
            size_hint,
        );
        let state_path = format!("{out_abs}/{STATE_FILE}");
        if !writer.same_content(&state_path, &state) {
            let place = writer.place(&state_path);
            writer
                .make_dirs(&[dirname(&place).to_string()])
                .and_then(|()| writer.write(&place, &state))
                .map_err(|e| fail(io_error(&out_abs, &place, &e)))?;
        }
    }
    writer
        .finish(true)
        .map_err(|e| io_error(&out_abs, &writer.root, &e))?;

    findings.sort_by(|a, b| {
        (a.file.as_str(), a.row.0, a.row.1, a.row.2.as_str()).cmp(&(
            b.file.as_str(),
            b.row.0,
            b.row.1,
            b.row.2.as_str(),
        ))
    });
    Ok(TreeResult {
        outputs,
        findings,
        written,
        unchanged,
        removed,
        seconds: started.elapsed().as_secs_f64(),
    })
}
