//! The path arithmetic of tools/hipify/tree.py, on `/`-separated strings, exactly as Python does it
//! (posixpath.normpath, str(PurePosixPath(..)), Path.suffix, os.path.splitext, PurePath ordering, ...).

use std::cmp::Ordering;
use std::collections::HashSet;

use serde::Deserialize;

/// `posixpath.normpath(path)`.
pub fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let mut initial = usize::from(path.starts_with('/'));
    if initial == 1 && path.starts_with("//") && !path.starts_with("///") {
        initial = 2;
    }
    let mut comps: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        if comp.is_empty() || comp == "." {
            continue;
        }
        if comp != ".." || (initial == 0 && comps.is_empty()) || comps.last() == Some(&"..") {
            comps.push(comp);
        } else if !comps.is_empty() {
            comps.pop();
        }
    }
    let mut out = "/".repeat(initial);
    out.push_str(&comps.join("/"));
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// `str(PurePosixPath(text))`: empty and `.` components dropped, `..` kept, a leading `//` (exactly two)
/// kept, `.` for nothing.
pub fn pure_path(text: &str) -> String {
    let root = if !text.starts_with('/') {
        ""
    } else if text.starts_with("//") && !text.starts_with("///") {
        "//"
    } else {
        "/"
    };
    let parts: Vec<&str> = text
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let mut out = root.to_string();
    out.push_str(&parts.join("/"));
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// `os.path.join(a, b)` for two strings.
pub fn join(a: &str, b: &str) -> String {
    if b.starts_with('/') {
        return b.to_string();
    }
    if a.is_empty() || a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// tree.py's `_abs`: `normpath(abspath(path))` with `cwd` as `os.getcwd()`.
pub fn abs_path(path: &str, cwd: &str) -> String {
    if path.starts_with('/') {
        normpath(path)
    } else {
        normpath(&join(cwd, path))
    }
}

/// `os.path.dirname(path)`.
pub fn dirname(path: &str) -> &str {
    let i = path.rfind('/').map_or(0, |i| i + 1);
    let head = &path[..i];
    if !head.is_empty() && head.bytes().any(|b| b != b'/') {
        head.trim_end_matches('/')
    } else {
        head
    }
}

/// `os.path.basename(path)`.
pub fn basename(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// `PurePosixPath(path).parent` for a normalised path.
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        None => ".",
        Some(0) => "/",
        Some(i) if path[..i].bytes().all(|b| b == b'/') => &path[..i],
        Some(i) => &path[..i],
    }
}

/// `PurePath.suffix` of a file name: from the last dot, unless that dot leads or ends the name.
pub fn suffix(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) if i > 0 && i < name.len() - 1 => &name[i..],
        _ => "",
    }
}

/// `os.path.splitext(path)[1]`: the last dot of the last component, leading dots skipped.
pub fn splitext_ext(path: &str) -> &str {
    let name_at = path.rfind('/').map_or(0, |i| i + 1);
    let name = &path[name_at..];
    let Some(dot) = name.rfind('.') else {
        return "";
    };
    if name[..dot].bytes().all(|b| b == b'.') {
        return ""; // only dots before it (".cu", "..x")
    }
    &name[dot..]
}

/// `str.lower()` for the suffix checks: ASCII suffixes are all that can match (a non-ASCII one cannot lower
/// to any of the sets' members), so only ASCII is lowered.
pub fn lower(text: &str) -> String {
    text.to_ascii_lowercase()
}

/// tree.py's `_is_within` (``Path.relative_to``) for two absolute, normalised paths.
pub fn is_within(child: &str, parent: &str) -> bool {
    if child == parent {
        return true;
    }
    if parent == "/" {
        return child.starts_with('/');
    }
    child.len() > parent.len()
        && child.starts_with(parent)
        && child.as_bytes()[parent.len()] == b'/'
}

/// The order of Python 3.11's `PurePosixPath`s (`_cparts`: the root, then the components, compared as lists).
pub fn path_cmp(a: &str, b: &str) -> Ordering {
    fn parts(p: &str) -> impl Iterator<Item = &str> {
        let root = if p.starts_with("//") && !p.starts_with("///") {
            Some("//")
        } else if p.starts_with('/') {
            Some("/")
        } else {
            None
        };
        root.into_iter()
            .chain(p.split('/').filter(|c| !c.is_empty() && *c != "."))
    }
    parts(a).cmp(parts(b))
}

/// tree.py's `_relative`: `os.path.relpath(target, base)` for two absolute, normalised paths.
pub fn relative(target: &str, base: &str) -> String {
    let t: Vec<&str> = target.split('/').filter(|p| !p.is_empty()).collect();
    let b: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<&str> = vec![".."; b.len() - common];
    parts.extend_from_slice(&t[common..]);
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

fn swap_cuda(text: &str) -> String {
    text.replace("cuda", "hip").replace("CUDA", "HIP")
}

/// tree.py's `_output_rel` (`naming`: hipify_torch or keep).
pub fn output_rel(rel: &str, changed: bool, keep: bool) -> String {
    let (parent, name) = match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    };
    let (stem, suffix) = match name.rfind('.') {
        Some(dot) if dot > 0 && dot != name.len() - 1 => (&name[..dot], &name[dot..]),
        _ => (name, ""),
    };
    let new_suffix = if suffix == ".cu" { ".hip" } else { suffix };
    if keep {
        return if parent.is_empty() {
            format!("{stem}{new_suffix}")
        } else {
            format!("{parent}/{stem}{new_suffix}")
        };
    }
    let new_parent = swap_cuda(parent);
    let mut new_stem = stem.to_string();
    if changed {
        new_stem = swap_cuda(stem);
        if new_parent == parent && new_stem.len() + new_suffix.len() == name.len() && {
            let mut joined = new_stem.clone();
            joined.push_str(new_suffix);
            joined == name
        } {
            new_stem = format!("{stem}_hip");
        }
    }
    if new_parent.is_empty() {
        format!("{new_stem}{new_suffix}")
    } else {
        format!("{new_parent}/{new_stem}{new_suffix}")
    }
}

/// Which files the tree pass translates, skips, takes for headers, and which include spellings are the
/// system's: tree.py's SOURCE_SUFFIXES, SKIP_DIRS, HEADER_SUFFIXES, SYSTEM_HEADERS and _SYSTEM_PREFIXES and
/// insert.py's IMPLICIT_SUFFIXES, exported into the plan by tools/hipify/plan.py (the tables stay Python's).
/// Suffixes are lower-case, with their dot.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct FileRules {
    source_suffixes: HashSet<String>,
    skip_dirs: HashSet<String>,
    header_suffixes: HashSet<String>,
    system_headers: HashSet<String>,
    system_prefixes: Vec<String>,
    implicit_suffixes: HashSet<String>,
}

impl FileRules {
    /// tree.py: `Path(path).suffix.lower() in SOURCE_SUFFIXES`
    pub fn is_source(&self, path: &str) -> bool {
        self.source_suffixes
            .contains(lower(suffix(basename(path))).as_str())
    }

    /// `os.path.splitext(path)[1].lower() in HEADER_SUFFIXES`
    pub fn is_header(&self, path: &str) -> bool {
        self.header_suffixes
            .contains(lower(splitext_ext(path)).as_str())
    }

    /// `os.path.splitext(path)[1].lower() in insert.IMPLICIT_SUFFIXES`
    pub fn is_implicit(&self, path: &str) -> bool {
        self.implicit_suffixes
            .contains(lower(splitext_ext(path)).as_str())
    }

    /// a directory `_walk` does not enter (besides hidden ones)
    pub fn skips_dir(&self, name: &str) -> bool {
        self.skip_dirs.contains(name)
    }

    /// tree.py's `is_system_header`.
    pub fn is_system_header(&self, spelling: &str) -> bool {
        self.system_headers.contains(spelling)
            || self
                .system_prefixes
                .iter()
                .any(|p| spelling.starts_with(p.as_str()))
    }
}

/// `posixpath.normpath(os.path.join(base, name))` into `out` (`stack`: scratch), without allocating once the
/// buffers have grown (the tree pass resolves every include against several bases).
pub fn normjoin_into(out: &mut String, stack: &mut Vec<usize>, base: &str, name: &str) {
    out.clear();
    stack.clear();
    let whole = if name.starts_with('/') || base.is_empty() {
        None
    } else {
        Some(base)
    };
    let first = whole.unwrap_or(name);
    let mut initial = usize::from(first.starts_with('/'));
    if initial == 1 && first.starts_with("//") && !first.starts_with("///") {
        initial = 2;
    }
    for _ in 0..initial {
        out.push('/');
    }
    let root = out.len();
    for comp in whole
        .into_iter()
        .flat_map(|b| b.split('/'))
        .chain(name.split('/'))
    {
        if comp.is_empty() || comp == "." {
            continue;
        }
        let last_dotdot = stack.last().is_some_and(|&at| &out[at..] == "..");
        if comp != ".." || (initial == 0 && stack.is_empty()) || last_dotdot {
            if out.len() > root {
                out.push('/');
            }
            stack.push(out.len());
            out.push_str(comp);
        } else if let Some(at) = stack.pop() {
            out.truncate(if at > root { at - 1 } else { root });
        }
    }
    if out.is_empty() {
        out.push('.');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normpath_like_python() {
        assert_eq!(normpath(""), ".");
        assert_eq!(normpath("/a/../../b"), "/b");
        assert_eq!(normpath("a/../../b"), "../b");
        assert_eq!(normpath("//a//b/./c/"), "//a/b/c");
        assert_eq!(normpath("///a"), "/a");
        assert_eq!(normpath("a/.."), ".");
    }

    #[test]
    fn normjoin_like_normpath_of_join() {
        let (mut out, mut stack) = (String::new(), Vec::new());
        let bases = ["/a/b", "a/b", "", "/", "//x", "../a", "..", "a", "/a/b/"];
        let names = [
            "c",
            "../c",
            "../../../c",
            "/abs/../d",
            "./x/./y/",
            "..",
            "../..",
            "",
            "x/../..",
            "//n",
        ];
        for base in bases {
            for name in names {
                normjoin_into(&mut out, &mut stack, base, name);
                assert_eq!(out, normpath(&join(base, name)), "{base:?} {name:?}");
            }
        }
    }

    #[test]
    fn pure_path_like_python() {
        assert_eq!(pure_path("./x"), "x");
        assert_eq!(pure_path("a//b/./c/"), "a/b/c");
        assert_eq!(pure_path("a/../b"), "a/../b");
        assert_eq!(pure_path("//x"), "//x");
        assert_eq!(pure_path("."), ".");
    }

    #[test]
    fn names() {
        assert_eq!(output_rel("bridge.h", true, false), "bridge_hip.h");
        assert_eq!(output_rel("cuda/util.cuh", false, false), "hip/util.cuh");
        assert_eq!(output_rel("CUDAHelpers.hpp", true, false), "HIPHelpers.hpp");
        assert_eq!(output_rel("x.cu", true, false), "x.hip");
        assert_eq!(output_rel(".cu", true, false), ".cu_hip");
        assert_eq!(output_rel("cuda/a.cu", true, true), "cuda/a.hip");
        assert_eq!(splitext_ext("a/..cu"), "");
        assert_eq!(splitext_ext("a/b.c.cu"), ".cu");
        assert_eq!(suffix("a."), "");
        assert_eq!(relative("/a/b/c", "/a/d"), "../b/c");
        assert_eq!(relative("/a", "/a"), ".");
        assert_eq!(path_cmp("/a/b/c", "/a/b-c"), Ordering::Less);
        assert_eq!(dirname("/a"), "/");
        assert_eq!(dirname("a"), "");
        assert_eq!(parent("/a"), "/");
    }
}
