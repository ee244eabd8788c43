//! The file-system side of tools/hipify/tree.py: `_walk` (os.walk's order and filters) and `_Writer` (a fresh
//! output directory staged beside its final place and renamed into it; an existing one written file by file
//! through a temporary file and a rename).

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;

use super::tree::TreeError;
use super::tree_path::{abs_path, basename, is_within, join, parent, pure_path, FileRules};

/// One input file (tree.py's `_Source`).
#[derive(Clone, Debug)]
pub struct Source {
    /// absolute, normalised
    pub path: String,
    /// relative to its root, `/`-separated
    pub rel: String,
    /// the source directory (or the file's parent for a file argument)
    pub root: String,
    pub is_dir_root: bool,
}

/// An OS string as Python's `str` would hold it, when that is plain UTF-8 (else the run is left to Python:
/// surrogate-escaped names sort and print differently).
pub fn utf8(name: OsString) -> Result<String, TreeError> {
    name.into_string()
        .map_err(|n| TreeError::Fallback(format!("a path that is not UTF-8: {n:?}")))
}

/// The message of an OS error as Python's `err.strerror` has it (without Rust's " (os error N)").
pub fn strerror(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => {
            let text = io::Error::from_raw_os_error(code).to_string();
            match text.rfind(" (os error ") {
                Some(at) => text[..at].to_string(),
                None => text,
            }
        }
        None => err.to_string(),
    }
}

/// tree.py's `_walk`: the files of every source (directories walked top-down, sorted, hidden and SKIP_DIRS
/// directories and the output directory skipped) and the source directories.
pub fn walk(
    sources: &[String],
    out_dir: &str,
    cwd: &str,
    rules: &FileRules,
) -> Result<(Vec<Source>, Vec<String>), TreeError> {
    let mut found = Vec::new();
    let mut roots = Vec::new();
    for given in sources {
        let shown = pure_path(given);
        let src = abs_path(&shown, cwd);
        let meta = match fs::metadata(&src) {
            Ok(m) => m,
            Err(err) => {
                // Path.exists(): False for these, an exception for the rest
                return match err.raw_os_error() {
                    Some(libc_enoent) if [2, 20, 9, 40].contains(&libc_enoent) => {
                        Err(TreeError::Tool(format!("source not found: {shown}")))
                    }
                    _ => Err(TreeError::Fallback(format!("stat {src}: {err}"))),
                };
            }
        };
        if meta.is_dir() {
            if is_within(&src, out_dir) {
                return Err(TreeError::Tool(format!(
                    "output directory {out_dir} contains source {shown}: refusing to translate in place"
                )));
            }
            if src == "/" {
                return Err(TreeError::Fallback(
                    "the file system root as a source".into(),
                ));
            }
            roots.push(src.clone());
            walk_dir(&src, &src, out_dir, rules, &mut found)?;
        } else {
            found.push(Source {
                rel: basename(&src).to_string(),
                root: parent(&src).to_string(),
                path: src,
                is_dir_root: false,
            });
        }
    }
    Ok((found, roots))
}

/// os.walk(top) (topdown, followlinks=False, errors ignored) with `_walk`'s filters, for one directory.
fn walk_dir(
    top: &str,
    root: &str,
    out_dir: &str,
    rules: &FileRules,
    found: &mut Vec<Source>,
) -> Result<(), TreeError> {
    let Ok(entries) = fs::read_dir(top) else {
        return Ok(()); // (os.walk's onerror=None: an unreadable directory is skipped)
    };
    let mut dirs: Vec<(String, bool)> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else {
            return Ok(()); // os.walk gives up on the directory
        };
        let name = utf8(entry.file_name())?;
        let (is_dir, is_link) = match entry.file_type() {
            Ok(t) if t.is_symlink() => (fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()), true),
            Ok(t) => (t.is_dir(), false),
            Err(_) => (false, false),
        };
        if is_dir {
            dirs.push((name, is_link));
        } else {
            files.push(name);
        }
    }
    let out_prefix = format!("{out_dir}/");
    dirs.retain(|(d, _)| {
        !rules.skips_dir(d)
            && !d.starts_with('.')
            && !format!("{}/", join(top, d)).starts_with(&out_prefix)
    });
    dirs.sort();
    files.sort();
    let rel_dir = top.get(root.len() + 1..).unwrap_or("");
    for name in files {
        let rel = if rel_dir.is_empty() {
            name.clone()
        } else {
            format!("{rel_dir}/{name}")
        };
        found.push(Source {
            path: join(top, &name),
            rel,
            root: root.to_string(),
            is_dir_root: true,
        });
    }
    for (d, is_link) in dirs {
        if !is_link {
            walk_dir(&join(top, &d), root, out_dir, rules, found)?;
        }
    }
    Ok(())
}

/// `os.stat(path)`'s (st_size, st_mtime_ns).
pub fn size_mtime(meta: &fs::Metadata) -> (i64, i64) {
    (
        meta.size() as i64,
        meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
    )
}

impl Drop for Writer {
    /// A run that unwinds (a bug: the fast path then leaves the run to Python) leaves no staging directory.
    fn drop(&mut self) {
        if self.fresh && std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}

/// tree.py's `_Writer`.
pub struct Writer {
    pub final_dir: String,
    pub fresh: bool,
    pub root: String,
    /// fault injection for the tests (`MONARCH_FAULT_HIPIFY_PANIC_WRITE=NAME`): writing the output whose path
    /// ends with NAME panics, as a bug would
    panic_at: Option<String>,
}

impl Writer {
    pub fn new(out_dir: &str) -> Writer {
        let fresh = fs::symlink_metadata(out_dir).is_err();
        let root = format!(
            "{}/.{}.{}.hipify-tmp",
            super::tree_path::dirname(out_dir),
            basename(out_dir),
            std::process::id()
        );
        Writer {
            final_dir: out_dir.to_string(),
            fresh,
            root,
            panic_at: std::env::var("MONARCH_FAULT_HIPIFY_PANIC_WRITE")
                .ok()
                .filter(|v| !v.is_empty()),
        }
    }

    /// Where `path` (under the output directory) is written now.
    pub fn place(&self, path: &str) -> String {
        if self.fresh {
            format!("{}{}", self.root, &path[self.final_dir.len()..])
        } else {
            path.to_string()
        }
    }

    /// Make the directories `dirs` (places, as from `place`; each once).
    pub fn make_dirs(&self, dirs: &[String]) -> io::Result<()> {
        if self.fresh {
            // everything under the staging directory is new: one mkdir each, parents first
            let mut all: Vec<&str> = Vec::new();
            for d in dirs {
                let mut p = d.as_str();
                while p.len() > self.root.len() {
                    all.push(p);
                    p = parent(p);
                }
            }
            all.sort_unstable();
            all.dedup();
            fs::create_dir_all(&self.root)?;
            for d in all {
                match fs::create_dir(d) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => {}
                }
            }
            Ok(())
        } else {
            for d in dirs {
                fs::create_dir_all(d)?;
            }
            Ok(())
        }
    }

    /// Write `data` at `place` (its directory exists); returns (size, mtime_ns) of the file written.
    pub fn write(&self, place: &str, data: &[u8]) -> io::Result<Option<(i64, i64)>> {
        if self.panic_at.as_deref().is_some_and(|p| place.ends_with(p)) {
            panic!("MONARCH_FAULT_HIPIFY_PANIC_WRITE: {place}");
        }
        if self.fresh {
            let mut f = fs::File::create(place)?;
            f.write_all(data)?;
            return Ok(f.metadata().ok().map(|m| size_mtime(&m)));
        }
        let dir = super::tree_path::dirname(place);
        let tmp = format!("{dir}/.{}.{}.tmp", basename(place), std::process::id());
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(data)?;
            let stat = f.metadata().ok().map(|m| size_mtime(&m)); // (a rename keeps the mtime)
            drop(f);
            fs::rename(&tmp, place)?;
            Ok(stat)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// `_same_content`: the existing file (not in a fresh directory) holds exactly `data`.
    pub fn same_content(&self, path: &str, data: &[u8]) -> bool {
        if self.fresh {
            return false;
        }
        match fs::metadata(path) {
            Ok(m) if m.len() == data.len() as u64 => fs::read(path).is_ok_and(|d| d == data),
            _ => false,
        }
    }

    /// `writer.stat(path)`'s (size, mtime_ns).
    pub fn stat(&self, path: &str) -> Option<(i64, i64)> {
        fs::metadata(self.place(path)).ok().map(|m| size_mtime(&m))
    }

    /// The end of a run: the staging directory into place (fresh) or removed (on failure).
    pub fn finish(&self, ok: bool) -> io::Result<()> {
        if !self.fresh {
            return Ok(());
        }
        if ok {
            if fs::metadata(&self.root).is_ok_and(|m| m.is_dir()) {
                fs::rename(&self.root, &self.final_dir)?;
            }
        } else {
            let _ = fs::remove_dir_all(&self.root);
        }
        Ok(())
    }
}
