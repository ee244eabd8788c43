//! tools/hipify/translate.py's `convert_launches` (`k<<<g, b, s, st>>>(args)` ->
//! `hipLaunchKernelGGL(k, dim3(g), dim3(b), s, st, args)`), with `_match_back_angle`, `_split_top` and the
//! `_KERNEL_TAIL` search.

use super::translate_ctx::{is_ws, strip};
use super::types::Include;

/// `_match_back_angle`: `data[end - 1]` is `>`: the index of the matching `<`.
fn match_back_angle(data: &[u8], end: usize) -> Option<usize> {
    let mut depth = 0i64;
    let mut i = end;
    while i > 0 {
        i -= 1;
        match data[i] {
            b'>' => depth += 1,
            b'<' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b';' | b'{' | b'}' => return None,
            _ => {}
        }
    }
    None
}

/// `_split_top`: `data[start..]` split at top-level commas until `stop` at depth 0: (pieces, index of stop),
/// or None when a `;` or an unbalanced bracket comes first.
fn split_top(data: &[u8], start: usize, stop: &[u8]) -> Option<(Vec<(usize, usize)>, usize)> {
    let n = data.len();
    let mut depth = 0i64;
    let mut pieces = Vec::new();
    let mut piece_start = start;
    let mut i = start;
    while i < n {
        if depth == 0 && data[i..].starts_with(stop) {
            pieces.push((piece_start, i));
            return Some((pieces, i));
        }
        let c = data[i];
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
            }
            b',' if depth == 0 => {
                pieces.push((piece_start, i));
                piece_start = i + 1;
            }
            b';' if depth == 0 => return None,
            b'"' | b'\'' => {
                let mut j = i + 1;
                while j < n && data[j] != c {
                    j += if data[j] == b'\\' { 2 } else { 1 };
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[inline]
fn ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

#[inline]
fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether all of `s` matches `(?:::\s*)?[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*\s*`
/// (deterministic: each step has one way to go).
fn kernel_tail(s: &[u8]) -> bool {
    let n = s.len();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < n && is_ws(s[*i]) {
            *i += 1;
        }
    };
    let ident = |i: &mut usize| -> bool {
        if *i >= n || !ident_start(s[*i]) {
            return false;
        }
        *i += 1;
        while *i < n && ident_byte(s[*i]) {
            *i += 1;
        }
        true
    };
    if s.starts_with(b"::") {
        i = 2;
        skip_ws(&mut i);
    }
    if !ident(&mut i) {
        return false;
    }
    loop {
        skip_ws(&mut i);
        if i == n {
            return true;
        }
        if !s[i..].starts_with(b"::") {
            return false;
        }
        i += 2;
        skip_ws(&mut i);
        if !ident(&mut i) {
            return false;
        }
    }
}

/// `_KERNEL_TAIL().search(data, lo, hi)`: the start of the leftmost match (which ends at `hi`).
fn kernel_tail_search(data: &[u8], lo: usize, hi: usize) -> Option<usize> {
    (lo..hi).find(|&p| (ident_start(data[p]) || data[p] == b':') && kernel_tail(&data[p..hi]))
}

/// `convert_launches(data, launches, includes)`: the new bytes (None: no launch converted), the includes with
/// shifted offsets (in place), and the input offsets of the launches that could not be parsed.
pub fn convert_launches(
    data: &[u8],
    launches: &[(usize, usize)],
    includes: &mut [Include],
) -> (Option<Vec<u8>>, Vec<usize>) {
    let n = data.len();
    let mut edits: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    let mut failed = Vec::new();
    for &(at, in_off) in launches {
        if at + 3 > n {
            failed.push(in_off); // (cannot happen: the scan records where "<<<" is in the output)
            continue;
        }
        let mut k_end = at;
        while k_end > 0 && (data[k_end - 1] == b' ' || data[k_end - 1] == b'\t') {
            k_end -= 1;
        }
        let mut k_start = k_end;
        let mut templated = false;
        if k_end > 0 && data[k_end - 1] == b'>' {
            let Some(lt) = match_back_angle(data, k_end) else {
                failed.push(in_off);
                continue;
            };
            k_start = lt;
            templated = true;
        }
        let Some(m) = kernel_tail_search(data, k_start.saturating_sub(256), k_start) else {
            failed.push(in_off);
            continue;
        };
        k_start = m;
        let kernel = strip(&data[k_start..k_end]);
        let Some((cfg_pieces, cfg_end)) = split_top(data, at + 3, b">>>") else {
            failed.push(in_off);
            continue;
        };
        let mut j = cfg_end + 3;
        while j < n && matches!(data[j], b' ' | b'\t' | b'\r' | b'\n') {
            j += 1;
        }
        if j >= n || data[j] != b'(' {
            failed.push(in_off);
            continue;
        }
        let args = split_top(data, j + 1, b")");
        let (Some((_, args_end)), 2..=4) = (args, cfg_pieces.len()) else {
            failed.push(in_off);
            continue;
        };
        let mut cfg: Vec<&[u8]> = cfg_pieces
            .iter()
            .map(|&(a, b)| strip(&data[a..b]))
            .collect();
        while cfg.len() < 4 {
            cfg.push(b"0");
        }
        let arg_text = strip(&data[j + 1..args_end]);
        let mut call = Vec::with_capacity(64 + kernel.len() + (args_end - at));
        call.extend_from_slice(b"hipLaunchKernelGGL(");
        if templated {
            call.push(b'(');
            call.extend_from_slice(kernel);
            call.push(b')');
        } else {
            call.extend_from_slice(kernel);
        }
        for (k, piece) in cfg.iter().enumerate() {
            call.extend_from_slice(match k {
                0 | 1 => b", dim3(",
                _ => b", ",
            });
            call.extend_from_slice(piece);
            if k < 2 {
                call.push(b')');
            }
        }
        if !arg_text.is_empty() {
            call.extend_from_slice(b", ");
            call.extend_from_slice(arg_text);
        }
        call.push(b')');
        if edits.last().is_some_and(|e| e.1 > k_start) {
            failed.push(in_off); // overlapping (nested) launch: leave it
            continue;
        }
        edits.push((k_start, args_end + 1, call));
    }
    if edits.is_empty() {
        return (None, failed);
    }
    let mut out = Vec::with_capacity(data.len() + edits.len() * 32);
    let mut pos = 0;
    for (start, end, repl) in &edits {
        out.extend_from_slice(&data[pos..*start]);
        out.extend_from_slice(repl);
        pos = *end;
    }
    out.extend_from_slice(&data[pos..]);
    for inc in includes.iter_mut() {
        let shift: isize = edits
            .iter()
            .filter(|(_, e, _)| *e <= inc.out_start)
            .map(|(s, e, r)| r.len() as isize - (e - s) as isize)
            .sum();
        inc.out_start = (inc.out_start as isize + shift) as usize;
        inc.out_end = (inc.out_end as isize + shift) as usize;
    }
    (Some(out), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(src: &[u8]) -> Vec<u8> {
        let at = memchr::memmem::find(src, b"<<<").unwrap();
        let (out, failed) = convert_launches(src, &[(at, at)], &mut []);
        assert!(failed.is_empty());
        out.unwrap()
    }

    #[test]
    fn launches() {
        assert_eq!(
            conv(b"k<<<g, b>>>(x, y);"),
            b"hipLaunchKernelGGL(k, dim3(g), dim3(b), 0, 0, x, y);"
        );
        assert_eq!(
            conv(b"  ns::k<T, 4><<<g, b, s, st>>>();"),
            b"  hipLaunchKernelGGL((ns::k<T, 4>), dim3(g), dim3(b), s, st);"
        );
        assert!(kernel_tail(b":: a :: b "));
        assert!(!kernel_tail(b"a::"));
        assert!(!kernel_tail(b"a.b"));
    }
}
