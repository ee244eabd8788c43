//! Results shared by the per-file pass, the lint and the tree pass (tools/hipify/translate.py's RawFinding,
//! Include and FileResult; tools/hipify/insert.py's fact bits).
//!
//! Names, spellings and messages are kept as bytes: Python decodes them as Latin-1 (one char per byte), so
//! a byte string here is a Python `str` with chars < 256; `latin1` turns one into a Rust `String`.

/// tools/hipify/insert.py's fact bits (what a file uses and includes)
pub mod facts {
    pub const USES_SYNC: u32 = 1;
    pub const USES_DEVICE: u32 = 2;
    pub const USES_API: u32 = 4;
    pub const HAS_RUNTIME: u32 = 8;
    pub const HAS_RUNTIME_API: u32 = 16;
    pub const DEFINES_SYNC: u32 = 32;
    pub const CRLF: u32 = 64;
    pub const SEEN_INCLUDE: u32 = 128;
    pub const RUNTIME_FIRST: u32 = 256;
}

/// A finding at a byte offset of the input (translate.py's RawFinding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFinding {
    pub offset: usize,
    pub name: Vec<u8>,
    /// unsupported | version | unmapped | hazard | deprecated | error | note
    pub kind: String,
    pub reason: Vec<u8>,
    pub suggestion: Vec<u8>,
    pub blocking: bool,
    pub rule: String,
}

/// An `#include` for the tree pass: where its path sits in the *output* bytes (translate.py's Include).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Include {
    pub out_start: usize,
    pub out_end: usize,
    /// the path as written
    pub spelling: Vec<u8>,
    pub angled: bool,
    pub in_offset: usize,
    /// the output has the database's HIP header there (a project file of that name wins)
    pub mapped: bool,
}

/// One file's translation (translate.py's FileResult).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileResult {
    pub data: Vec<u8>,
    pub changed: bool,
    pub findings: Vec<RawFinding>,
    pub includes: Vec<Include>,
    /// macro names #define'd in this file
    pub defines: Vec<Vec<u8>>,
    /// comments and literals in the input (the lint skips them)
    pub comment_spans: Vec<(usize, usize)>,
    pub facts: u32,
    /// lane-mask names defined neither here nor in the known project masks (sorted)
    pub unresolved: Vec<Vec<u8>>,
}

/// Bytes as Python's `bytes.decode("latin-1")`.
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// A `str` that Python would have made with `decode("latin-1")` back into bytes (None: a char >= 256).
pub fn from_latin1(text: &str) -> Option<Vec<u8>> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).ok())
        .collect()
}
