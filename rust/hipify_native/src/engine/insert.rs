//! tools/hipify/insert.py in Rust: what a file uses (`uses`), whether it defines the warp-sync macro and
//! ends its lines with CRLF (`defines_and_lines`), where the tree pass's added lines go
//! (`insertion_point`) and those lines (`render`). Each function follows the Python one of the same name
//! byte for byte (Python's `bytes.strip`, `re` matches and `find`s are spelled out as byte loops).

use memchr::{memchr, memmem};

use super::types::facts::CRLF as CRLF_FACT;
use super::types::facts::{DEFINES_SYNC, USES_API, USES_DEVICE};

/// insert.py's RUNTIME_HEADER
pub const RUNTIME_HEADER: &[u8] = b"hip/hip_runtime.h";
/// insert.py's RUNTIME_API_HEADER
pub const RUNTIME_API_HEADER: &[u8] = b"hip/hip_runtime_api.h";
const DEVICE: [&[u8]; 3] = [b"__global__", b"__device__", b"<<<"];
const API: [&[u8]; 2] = [b"cuda", b"hip"];

/// insert.py's _IDC: identifier bytes (ASCII word bytes and every byte >= 0x80)
#[inline]
fn idc(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// `re`'s `\w` for bytes patterns
#[inline]
fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `re`'s `\s` for bytes patterns (also bytes.strip()'s whitespace)
#[inline]
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// insert.py's _first: the first occurrence of `needle` as a whole word (`upper_follows`: followed by an
/// upper-case ASCII letter) outside the sorted `spans`, or None.
fn first(
    data: &[u8],
    needle: &[u8],
    spans: &[(usize, usize)],
    upper_follows: bool,
) -> Option<usize> {
    let finder = memmem::Finder::new(needle);
    let angle = needle[0] == b'<';
    let n = needle.len();
    let size = data.len();
    let mut from = 0;
    while from <= size {
        let i = from + finder.find(&data[from..])?;
        // the last span starting at or before i (bisect_right(starts, i) - 1)
        let k = spans.partition_point(|&(a, _)| a <= i);
        if k > 0 && i < spans[k - 1].1 {
            from = spans[k - 1].1; // in a comment or literal: go on after it
            continue;
        }
        let end = i + n;
        let before_ok = angle || i == 0 || !idc(data[i - 1]);
        let after_ok = if upper_follows {
            end < size && data[end].is_ascii_uppercase()
        } else {
            angle || end >= size || !idc(data[end])
        };
        if before_ok && after_ok {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

/// insert.py's uses: USES_DEVICE or USES_API (or 0) for the input `data`, outside its comments and literals
/// (`spans`, sorted).
pub fn uses(data: &[u8], spans: &[(usize, usize)]) -> u32 {
    if DEVICE
        .iter()
        .any(|n| first(data, n, spans, false).is_some())
    {
        return USES_DEVICE;
    }
    if API.iter().any(|n| first(data, n, spans, true).is_some()) {
        return USES_API;
    }
    0
}

/// insert.py's defines_and_lines: DEFINES_SYNC (a line `#define <sync_macro>` as a whole word) and CRLF
/// (the first newline follows a CR).
pub fn defines_and_lines(data: &[u8], sync_macro: Option<&[u8]>) -> u32 {
    let mut out = 0;
    if let Some(mac) = sync_macro.filter(|m| !m.is_empty()) {
        if defines(data, mac) {
            out |= DEFINES_SYNC;
        }
    }
    if let Some(nl) = memchr(b'\n', data) {
        if nl > 0 && data[nl - 1] == b'\r' {
            out |= CRLF_FACT;
        }
    }
    out
}

/// `re.search(rb"^[ \t]*#[ \t]*define[ \t]+" + mac + rb"\b", data, re.M)`, matched backwards from each
/// occurrence of the macro (the prefix of such a line has one shape only).
fn defines(data: &[u8], mac: &[u8]) -> bool {
    let finder = memmem::Finder::new(mac);
    let blank = |b: u8| b == b' ' || b == b'\t';
    let mut from = 0;
    while let Some(k) = finder.find(&data[from..]) {
        let at = from + k;
        from = at + 1;
        // \b after the macro
        let end = at + mac.len();
        let last_word = word(mac[mac.len() - 1]);
        let next_word = end < data.len() && word(data[end]);
        if last_word == next_word {
            continue;
        }
        // [ \t]+ define [ \t]* # [ \t]* at a line start, read backwards
        let mut p = at;
        while p > 0 && blank(data[p - 1]) {
            p -= 1;
        }
        if p == at || p < 6 || &data[p - 6..p] != b"define" {
            continue;
        }
        p -= 6;
        while p > 0 && blank(data[p - 1]) {
            p -= 1;
        }
        if p == 0 || data[p - 1] != b'#' {
            continue;
        }
        p -= 1;
        while p > 0 && blank(data[p - 1]) {
            p -= 1;
        }
        if p == 0 || data[p - 1] == b'\n' {
            return true;
        }
    }
    false
}

/// insert.py's _logical_end: the end (the newline's offset, or len) of the line at `i`, continued lines
/// (backslash-newline, CRs before the newline aside) included.
fn logical_end(data: &[u8], mut i: usize) -> usize {
    let n = data.len();
    loop {
        let Some(k) = memchr(b'\n', &data[i.min(n)..]) else {
            return n;
        };
        let end = i + k;
        let mut e = end;
        while e > i && data[e - 1] == b'\r' {
            e -= 1;
        }
        if !(e > i && data[e - 1] == b'\\') {
            return end;
        }
        i = end + 1;
    }
}

/// bytes.strip()
fn strip(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && space(s[a]) {
        a += 1;
    }
    while b > a && space(s[b - 1]) {
        b -= 1;
    }
    &s[a..b]
}

fn skip_blank(line: &[u8], mut p: usize) -> usize {
    while p < line.len() && (line[p] == b' ' || line[p] == b'\t') {
        p += 1;
    }
    p
}

/// `re.match(rb"[ \t]*#[ \t]*(\w*)[ \t]*(\S*)", line)`: (name, arg)
fn directive(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut p = skip_blank(line, 0);
    if p >= line.len() || line[p] != b'#' {
        return None;
    }
    p = skip_blank(line, p + 1);
    let ns = p;
    while p < line.len() && word(line[p]) {
        p += 1;
    }
    let name = &line[ns..p];
    p = skip_blank(line, p);
    let a = p;
    while p < line.len() && !space(line[p]) {
        p += 1;
    }
    Some((name, &line[a..p]))
}

/// `re.match(rb"[ \t]*#[ \t]*if[ \t]*![ \t]*defined[ \t]*\(?[ \t]*(\w+)", line).group(1)`
fn guard_if(line: &[u8]) -> Option<&[u8]> {
    let mut p = skip_blank(line, 0);
    let lit = |p: usize, s: &[u8]| line.len() >= p + s.len() && &line[p..p + s.len()] == s;
    if !lit(p, b"#") {
        return None;
    }
    p = skip_blank(line, p + 1);
    if !lit(p, b"if") {
        return None;
    }
    p = skip_blank(line, p + 2);
    if !lit(p, b"!") {
        return None;
    }
    p = skip_blank(line, p + 1);
    if !lit(p, b"defined") {
        return None;
    }
    p = skip_blank(line, p + 7);
    if lit(p, b"(") {
        p += 1;
    }
    p = skip_blank(line, p);
    let s = p;
    while p < line.len() && word(line[p]) {
        p += 1;
    }
    (p > s).then(|| &line[s..p])
}

/// insert.py's insertion_point: where the added lines go (the start of a line; see insert.py's doc).
pub fn insertion_point(data: &[u8]) -> usize {
    let n = data.len();
    let mut i = if data.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    let mut guard: &[u8] = b"";
    let mut guard_at: Option<usize> = None;
    let mut directives = 0u32;
    while i < n {
        let line_end = logical_end(data, i);
        let line = &data[i..line_end];
        let stripped = strip(line);
        if stripped.is_empty() || stripped.starts_with(b"//") {
            i = line_end + 1;
            continue;
        }
        if stripped.starts_with(b"/*") {
            let open = i + memmem::find(line, b"/*").unwrap_or(0) + 2;
            let Some(k) = memmem::find(&data[open.min(n)..], b"*/") else {
                return guard_at.unwrap_or(n);
            };
            let close = open + k;
            let rest_end = logical_end(data, close);
            let rest = strip(&data[close + 2..rest_end]);
            if rest.starts_with(b"/*") {
                // another comment: go on from it
                i = close + 2 + memmem::find(&data[close + 2..], b"/*").unwrap_or(0);
                continue;
            }
            if !rest.is_empty() && !rest.starts_with(b"//") {
                return guard_at.unwrap_or(i); // code after the comment on its line
            }
            i = rest_end + 1;
            continue;
        }
        let Some((name, arg)) = directive(line) else {
            return guard_at.unwrap_or(i); // code
        };
        if name == b"pragma" && arg == b"once" {
            i = line_end + 1;
            continue;
        }
        directives += 1;
        if directives == 1 && (name == b"ifndef" || name == b"if") {
            let found = if name == b"ifndef" {
                Some(arg)
            } else {
                guard_if(line)
            };
            if let Some(found) = found.filter(|f| !f.is_empty()) {
                guard = found;
                guard_at = Some(i);
                i = line_end + 1;
                continue;
            }
        }
        if let Some(at) = guard_at {
            if directives == 2 && name == b"define" && arg == guard {
                guard_at = None; // an include guard: the lines go inside it
                i = line_end + 1;
                continue;
            }
            return at;
        }
        if name != b"define" && name != b"undef" {
            return i; // an #include, a conditional, or another directive
        }
        i = line_end + 1;
    }
    guard_at.unwrap_or(i.min(n))
}

/// insert.py's render: the lines to insert (the macro, guarded, then `#include <runtime>`).
pub fn render(define: Option<&[u8]>, runtime: Option<&[u8]>, crlf: bool) -> Vec<u8> {
    let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = Vec::with_capacity(200);
    if let Some(d) = define.filter(|d| !d.is_empty()) {
        out.extend_from_slice(b"#ifndef ");
        out.extend_from_slice(d);
        out.extend_from_slice(
            b"  // [hipify] HIP 6.2-6.x declare the warp *_sync builtins only with it",
        );
        out.extend_from_slice(eol);
        out.extend_from_slice(b"#define ");
        out.extend_from_slice(d);
        out.extend_from_slice(eol);
        out.extend_from_slice(b"#endif");
        out.extend_from_slice(eol);
    }
    if let Some(r) = runtime.filter(|r| !r.is_empty()) {
        out.extend_from_slice(b"#include <");
        out.extend_from_slice(r);
        out.extend_from_slice(b">  // [hipify] nvcc includes the CUDA runtime implicitly");
        out.extend_from_slice(eol);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points() {
        assert_eq!(insertion_point(b""), 0);
        assert_eq!(insertion_point(b"#pragma once\n#include <a>\n"), 13);
        assert_eq!(insertion_point(b"#ifndef X\n#define X\n#include <a>\n"), 20);
        assert_eq!(insertion_point(b"#ifndef X\n#include <a>\n"), 0);
        assert_eq!(insertion_point(b"\xef\xbb\xbf// c\nint x;\n"), 8);
        assert_eq!(insertion_point(b"/* a */ /* b */\nint x;"), 16);
        assert_eq!(insertion_point(b"/* a"), 4);
    }

    #[test]
    fn facts() {
        assert_eq!(uses(b"__global__ void k();", &[]), USES_DEVICE);
        assert_eq!(uses(b"// __global__\ncudaMalloc", &[(0, 13)]), USES_API);
        assert_eq!(uses(b"cudax hipy", &[]), 0);
        let m: &[u8] = b"HIP_ENABLE_WARP_SYNC_BUILTINS";
        assert_eq!(
            defines_and_lines(b" # define HIP_ENABLE_WARP_SYNC_BUILTINS\r\n", Some(m)),
            DEFINES_SYNC | CRLF_FACT
        );
        assert_eq!(
            defines_and_lines(b"x #define HIP_ENABLE_WARP_SYNC_BUILTINS\n", Some(m)),
            0
        );
    }
}
