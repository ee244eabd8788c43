//! tools/hipify/lint.py's lint_bytes and silenced in Rust, over crate::lint's candidate scanner, plus
//! translate.py's positions and line_starts.

use std::collections::HashMap;

use memchr::{memchr_iter, memrchr};

/// translate.py's line_starts: offsets where lines start (`\n` ends a line).
pub fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut out = Vec::with_capacity(data.len() / 32 + 1);
    out.push(0);
    out.extend(memchr_iter(b'\n', data).map(|i| i + 1));
    out
}

/// translate.py's positions: byte offsets -> (line, column), both 1-based; columns count bytes. Offsets
/// past the end count as Python's slices do (clamped to the data).
pub fn positions(data: &[u8], offsets: &[usize]) -> HashMap<usize, (usize, usize)> {
    let mut sorted: Vec<usize> = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = HashMap::with_capacity(sorted.len());
    let n = data.len();
    let mut line = 1;
    let mut last = 0; // (clamped) offset counted up to
    let mut line_start = 0; // the start of the line at `last`
    for off in sorted {
        let to = off.min(n);
        if to > last {
            let seg = &data[last..to];
            line += memchr_iter(b'\n', seg).count();
            if let Some(k) = memrchr(b'\n', seg) {
                line_start = last + k + 1;
            }
            last = to;
        }
        out.insert(off, (line, off - line_start + 1));
    }
    out
}
