//! The context checks of tools/hipify/translate.py's per-file pass, byte for byte: whether a call's result is
//! discarded (`_discarded_call`, `_prev_code`, `_line_comment_at`, `_call_end`, `_SIMPLE_STATEMENT`), whether a
//! name is declared here (`_is_declaration`, `_prev_token`), a member (`_is_member`) or a namespace
//! (`_namespace_context`), the two regexes that pick findings for names and headers no table has
//! (`_CUDA_LOOKING`, `_CUDA_ONLY_HEADER`) and the `_DEFINE` findall. Each function names the Python it follows.

use memchr::{memchr, memmem, memrchr};

/// Python's `bytes.isspace` set (and the `\s` of a bytes regex): space, `\t \n \v \f \r`.
#[inline]
pub fn is_ws(c: u8) -> bool {
    c == b' ' || (b'\t'..=b'\r').contains(&c)
}

/// `[A-Za-z0-9_]` (translate.py `_WORD`, `_WORD_BYTES`; the `\w` of a bytes regex)
#[inline]
pub fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `bytes.rstrip()`
#[inline]
pub fn rstrip(s: &[u8]) -> &[u8] {
    let mut e = s.len();
    while e > 0 && is_ws(s[e - 1]) {
        e -= 1;
    }
    &s[..e]
}

/// `bytes.lstrip()`
#[inline]
pub fn lstrip(s: &[u8]) -> &[u8] {
    let mut b = 0;
    while b < s.len() && is_ws(s[b]) {
        b += 1;
    }
    &s[b..]
}

/// `bytes.strip()`
#[inline]
pub fn strip(s: &[u8]) -> &[u8] {
    lstrip(rstrip(s))
}

/// `s.lstrip(b" \t")`
#[inline]
pub fn lstrip_blanks(s: &[u8]) -> &[u8] {
    lstrip_set(s, b" \t")
}

/// `s.lstrip(chars)`
#[inline]
fn lstrip_set<'a>(s: &'a [u8], chars: &[u8]) -> &'a [u8] {
    let mut b = 0;
    while b < s.len() && chars.contains(&s[b]) {
        b += 1;
    }
    &s[b..]
}

/// `data.rfind(b"\n", 0, hi) + 1`: the start of the line holding offset `hi` (or just after it).
#[inline]
pub fn line_start(data: &[u8], hi: usize) -> usize {
    memrchr(b'\n', &data[..hi]).map_or(0, |p| p + 1)
}

/// `_line_comment_at`: where a `//` comment starts in `line` (outside string and character literals).
fn line_comment_at(line: &[u8]) -> Option<usize> {
    let at = memmem::find(line, b"//")?;
    if !line[..at].contains(&b'"') && !line[..at].contains(&b'\'') {
        return Some(at);
    }
    let mut quote = 0u8;
    let n = line.len();
    let mut i = 0;
    while i < n {
        let c = line[i];
        if quote != 0 {
            if c == b'\\' {
                i += 1;
            } else if c == quote {
                quote = 0;
            }
        } else if c == b'"' || c == b'\'' {
            quote = c;
        } else if c == b'/' && i + 1 < n && line[i + 1] == b'/' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// `_prev_code`: the end of the code before `j` (comments and blanks skipped); 0 at the start of the file,
/// -1 when a preprocessor line before `j`'s own line comes first.
fn prev_code(data: &[u8], j: usize) -> isize {
    let mut k = j;
    while k > 0 && (data[k - 1] == b' ' || data[k - 1] == b'\t') {
        k -= 1;
    }
    if k > 0 && data[k - 1] != b'\n' && data[k - 1] != b'/' {
        return k as isize;
    }
    if k > 0 && data[k - 1] == b'\n' {
        let ls = line_start(data, k - 1);
        let line = rstrip(&data[ls..k - 1]);
        if !line.is_empty() && !line.contains(&b'/') && !lstrip(line).starts_with(b"#") {
            return (ls + line.len()) as isize;
        }
    }
    let own_line = line_start(data, j);
    let mut j = j;
    loop {
        while j > 0 && is_ws(data[j - 1]) {
            j -= 1;
        }
        if j == 0 {
            return 0;
        }
        let ls = line_start(data, j);
        let line = &data[ls..j];
        if ls < own_line && lstrip(line).starts_with(b"#") {
            return -1;
        }
        if let Some(k) = line_comment_at(line) {
            j = ls + k;
            continue;
        }
        if j >= 2 && &data[j - 2..j] == b"*/" {
            if let Some(opening) = memmem::rfind(&data[..j - 2], b"/*") {
                j = opening;
                continue;
            }
        }
        return j as isize;
    }
}

/// `_call_end`: after the name ending at `end`, the offset just past its call's closing parenthesis.
fn call_end(data: &[u8], end: usize) -> Option<usize> {
    let n = data.len();
    let mut i = end;
    while i < n && is_ws(data[i]) {
        i += 1;
    }
    if i >= n || data[i] != b'(' {
        return None;
    }
    let mut depth = 0i64;
    loop {
        // the next of _CALL_TOKENS: [()";'] | //[^\n]* | /\*.*?(?:\*/|\Z)
        let mut p = i;
        let (c, tok_end) = loop {
            if p >= n {
                return None;
            }
            let c = data[p];
            match c {
                b'(' | b')' | b'"' | b';' | b'\'' => break (c, p + 1),
                b'/' if p + 1 < n && data[p + 1] == b'/' => {
                    break (c, memchr(b'\n', &data[p..]).map_or(n, |k| p + k));
                }
                b'/' if p + 1 < n && data[p + 1] == b'*' => {
                    break (
                        c,
                        memmem::find(&data[p + 2..], b"*/").map_or(n, |k| p + 2 + k + 2),
                    );
                }
                _ => p += 1,
            }
        };
        i = tok_end;
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' | b'\'' => {
                let mut k = i;
                while k < n && data[k] != c && data[k] != b'\n' {
                    k += if data[k] == b'\\' { 2 } else { 1 };
                }
                i = k + 1;
            }
            b';' if depth == 1 => return None, // a ';' in the arguments: not a plain call
            _ => {}
        }
    }
}

/// `_SIMPLE_STATEMENT.match(data, end)`: `\s*\((?:[^()"'/;]|\((?:[^()"'/;]|\([^()"'/;]*\))*\))*\)\s*;`
/// (three levels of parentheses at most; the regex is deterministic, so a byte loop is the same).
fn simple_statement(data: &[u8], end: usize) -> bool {
    fn group(data: &[u8], i: &mut usize, level: u32) -> bool {
        *i += 1; // the '('
        while *i < data.len() {
            match data[*i] {
                b')' => {
                    *i += 1;
                    return true;
                }
                b'(' => {
                    if level == 3 || !group(data, i, level + 1) {
                        return false;
                    }
                }
                b'"' | b'\'' | b'/' | b';' => return false,
                _ => *i += 1,
            }
        }
        false
    }
    let n = data.len();
    let mut i = end;
    while i < n && is_ws(data[i]) {
        i += 1;
    }
    if i >= n || data[i] != b'(' || !group(data, &mut i, 1) {
        return false;
    }
    while i < n && is_ws(data[i]) {
        i += 1;
    }
    i < n && data[i] == b';'
}

/// `_discarded_call`: whether the call of the name at `data[start..end]` is a statement of its own.
pub fn discarded_call(data: &[u8], start: usize, end: usize) -> bool {
    if !simple_statement(data, end) {
        let Some(close) = call_end(data, end) else {
            return false;
        };
        let n = data.len();
        let mut k = close;
        loop {
            while k < n && is_ws(data[k]) {
                k += 1;
            }
            if data[k..].starts_with(b"/*") {
                match memmem::find(&data[k + 2..], b"*/") {
                    None => return false,
                    Some(c) => {
                        k = k + 2 + c + 2;
                        continue;
                    }
                }
            }
            break;
        }
        if k >= n || data[k] != b';' {
            return false;
        }
    }
    let j = prev_code(data, start);
    if j > 1 && &data[j as usize - 2..j as usize] == b"::" {
        return false; // ::name(...): "(void)" cannot go between "::" and the name
    }
    if j <= 0 {
        return true;
    }
    let j = j as usize;
    let c = data[j - 1];
    match c {
        b';' | b'{' | b'}' => true,
        b':' => {
            // case x: / default: / label:, not a ?: or a ::
            let ls = line_start(data, j);
            let colon_before = j >= 2 && data[j - 2] == b':'; // data[j-2:j-1] == b":"
            !colon_before && !data[ls..j].contains(&b'?')
        }
        b')' => {
            // if (...) / for (...) / while (...), not a cast
            let mut depth = 0i64;
            let mut i = j as isize - 1;
            while i >= 0 {
                let b = data[i as usize];
                if b == b')' {
                    depth += 1;
                } else if b == b'(' {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                i -= 1;
            }
            if i < 0 {
                return false; // data[-1:-1]: empty
            }
            let mut w = i as usize;
            while w > 0 && is_ws(data[w - 1]) {
                w -= 1;
            }
            let mut ws = w;
            while ws > 0 && is_word(data[ws - 1]) {
                ws -= 1;
            }
            matches!(&data[ws..w], b"if" | b"for" | b"while")
        }
        _ if is_word(c) => {
            let mut ws = j;
            while ws > 0 && is_word(data[ws - 1]) {
                ws -= 1;
            }
            matches!(&data[ws..j], b"else" | b"do")
        }
        _ => false,
    }
}

const NOT_TYPES: &[&[u8]] = &[
    b"return",
    b"case",
    b"else",
    b"goto",
    b"throw",
    b"sizeof",
    b"new",
    b"delete",
    b"co_return",
    b"co_yield",
    b"default",
    b"public",
    b"private",
    b"protected",
    b"do",
    b"and",
    b"or",
    b"not",
];

/// `_is_declaration`: whether the name at `start..end` is declared here (after a type, followed by one of
/// `= ; , ) [ { : ( <`).
pub fn is_declaration(data: &[u8], start: usize, end: usize) -> bool {
    let window = &data[end..(end + 64).min(data.len())];
    let nxt = lstrip_set(window, b" \t\r\n");
    if nxt.is_empty()
        || !b"=;,)[{:(<".contains(&nxt[0])
        || nxt.starts_with(b"==")
        || nxt.starts_with(b"::")
    {
        return false;
    }
    match prev_token(data, start.saturating_sub(64), start) {
        Some(prev) => !NOT_TYPES.contains(&prev),
        None => false,
    }
}

/// `_prev_token`: the token before a declared name (an identifier from its first non-digit, or one of
/// `* & >`) ending `data[lo..hi]` before white space.
fn prev_token(data: &[u8], lo: usize, hi: usize) -> Option<&[u8]> {
    let q = rstrip(&data[lo..hi]).len();
    if q == 0 {
        return None;
    }
    let q = q + lo;
    let c = data[q - 1];
    if c == b'*' || c == b'&' || c == b'>' {
        return Some(&data[q - 1..q]);
    }
    if !is_word(c) {
        return None;
    }
    let mut p = q - 1;
    while p > lo && is_word(data[p - 1]) {
        p -= 1;
    }
    while p < q && data[p].is_ascii_digit() {
        p += 1;
    }
    (p < q).then(|| &data[p..q])
}

/// `_is_member`: whether the name at `start` follows `.` or `->`.
pub fn is_member(data: &[u8], start: usize) -> bool {
    let before = rstrip(&data[start.saturating_sub(8)..start]);
    before.ends_with(b".") || before.ends_with(b"->")
}

/// `_namespace_context`: `cub::`, `namespace cub`, `using namespace cub`.
pub fn namespace_context(data: &[u8], start: usize, end: usize) -> bool {
    let after = lstrip_set(&data[end..(end + 8).min(data.len())], b" \t");
    if after.starts_with(b"::") {
        return true;
    }
    rstrip(&data[start.saturating_sub(16)..start]).ends_with(b"namespace")
}

#[inline]
fn all_word(s: &[u8]) -> bool {
    s.iter().all(|&c| is_word(c))
}

/// `_CUDA_LOOKING().match(name)`: `(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|cu(?:blas|rand|sparse|fft|solver|dnn|tensor)\w+
/// |CU_[A-Z0-9_]+|CU(?:BLAS|RAND|SPARSE|FFT|SOLVER|DNN|DA_ERROR)_\w+|nvrtc[A-Z]\w*)\Z`
pub fn cuda_looking(name: &[u8]) -> bool {
    if !all_word(name) {
        return false; // every alternative ends in \w* up to \Z
    }
    let upper_at = |k: usize| name.get(k).is_some_and(|c| c.is_ascii_uppercase());
    if let Some(rest) = name.strip_prefix(b"cu") {
        if rest.starts_with(b"da") && upper_at(4) {
            return true;
        }
        if upper_at(2) && name.get(3).is_some_and(|c| c.is_ascii_lowercase()) {
            return true;
        }
        for lib in [
            &b"blas"[..],
            b"rand",
            b"sparse",
            b"fft",
            b"solver",
            b"dnn",
            b"tensor",
        ] {
            if rest.starts_with(lib) && rest.len() > lib.len() {
                return true;
            }
        }
        return false;
    }
    if let Some(rest) = name.strip_prefix(b"CU") {
        if let Some(tail) = rest.strip_prefix(b"_") {
            if !tail.is_empty()
                && tail
                    .iter()
                    .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
            {
                return true;
            }
        }
        for lib in [
            &b"BLAS_"[..],
            b"RAND_",
            b"SPARSE_",
            b"FFT_",
            b"SOLVER_",
            b"DNN_",
            b"DA_ERROR_",
        ] {
            if rest.starts_with(lib) && rest.len() > lib.len() {
                return true;
            }
        }
        return false;
    }
    name.starts_with(b"nvrtc") && upper_at(5)
}

/// `_CUDA_ONLY_HEADER().match(path)`: `(?:cuda/(?:pipeline|barrier|latch|semaphore|annotated_ptr|memcpy_async
/// |std/barrier)|cuda_pipeline\w*\.h|cuda_awbarrier\w*\.h|mma\.h|crt/\w+\.h|nvml\.h|nvtx3?/\S*|nvToolsExt\w*\.h
/// |cudaProfiler\.h)\Z`
pub fn cuda_only_header(path: &[u8]) -> bool {
    let word_h = |rest: &[u8], min: usize| -> bool {
        rest.strip_suffix(b".h")
            .is_some_and(|w| w.len() >= min && all_word(w))
    };
    if let Some(rest) = path.strip_prefix(b"cuda/") {
        return matches!(
            rest,
            b"pipeline"
                | b"barrier"
                | b"latch"
                | b"semaphore"
                | b"annotated_ptr"
                | b"memcpy_async"
                | b"std/barrier"
        );
    }
    if let Some(rest) = path.strip_prefix(b"cuda_pipeline") {
        return word_h(rest, 0);
    }
    if let Some(rest) = path.strip_prefix(b"cuda_awbarrier") {
        return word_h(rest, 0);
    }
    if let Some(rest) = path.strip_prefix(b"crt/") {
        return word_h(rest, 1);
    }
    if let Some(rest) = path.strip_prefix(b"nvToolsExt") {
        return word_h(rest, 0);
    }
    if let Some(rest) = path
        .strip_prefix(b"nvtx/")
        .or_else(|| path.strip_prefix(b"nvtx3/"))
    {
        return !rest.iter().any(|&c| is_ws(c));
    }
    matches!(path, b"mma.h" | b"nvml.h" | b"cudaProfiler.h")
}

/// `_DEFINE().findall(data)`: the names of `#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)`, anywhere.
pub fn define_names(data: &[u8], out: &mut Vec<Vec<u8>>) {
    let n = data.len();
    let mut from = 0;
    while let Some(k) = memchr(b'#', &data[from..]) {
        let at = from + k;
        from = at + 1;
        let mut j = at + 1;
        while j < n && (data[j] == b' ' || data[j] == b'\t') {
            j += 1;
        }
        if !data[j..].starts_with(b"define") {
            continue;
        }
        j += 6;
        let blanks = j;
        while j < n && (data[j] == b' ' || data[j] == b'\t') {
            j += 1;
        }
        if j == blanks || j >= n || !(data[j].is_ascii_alphabetic() || data[j] == b'_') {
            continue;
        }
        let s = j;
        while j < n && is_word(data[j]) {
            j += 1;
        }
        out.push(data[s..j].to_vec());
        from = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looking() {
        for yes in [
            &b"cudaFoo"[..],
            b"cuFoo",
            b"cublasX",
            b"CU_A1",
            b"CUBLAS_x",
            b"CUDA_ERROR_X",
            b"nvrtcA",
            b"cudaX\xe9"[..5].as_ref(),
        ] {
            assert!(cuda_looking(yes), "{yes:?}");
        }
        for no in [
            &b"cuda"[..],
            b"cudax",
            b"cublas",
            b"cuFOO",
            b"CU_a",
            b"CU_",
            b"CUBLAS",
            b"CUBLAS_",
            b"nvrtc",
            b"cudaX\xe9",
            b"curand",
        ] {
            assert!(!cuda_looking(no), "{no:?}");
        }
    }

    #[test]
    fn headers() {
        for yes in [
            &b"cuda/pipeline"[..],
            b"cuda_pipeline.h",
            b"cuda_pipeline_primitives.h",
            b"crt/x.h",
            b"nvtx3/nvToolsExt.h",
            b"nvtx/",
            b"mma.h",
            b"nvToolsExt.h",
        ] {
            assert!(cuda_only_header(yes), "{yes:?}");
        }
        for no in [
            &b"cuda/pipelines"[..],
            b"crt/.h",
            b"nvtx3/a b",
            b"cuda_pipeline.hh",
            b"x/mma.h",
        ] {
            assert!(!cuda_only_header(no), "{no:?}");
        }
    }

    #[test]
    fn statements() {
        assert!(discarded_call(b"cudaFree(p);", 0, 8));
        assert!(discarded_call(b"x;\n  cudaFree(p) /* c */ ;", 5, 13));
        assert!(!discarded_call(b"e = cudaFree(p);", 4, 12));
        assert!(discarded_call(b"if (x) cudaFree(p);", 7, 15));
        assert!(!discarded_call(b"(int) cudaFree(p);", 6, 14));
        assert!(!discarded_call(b"a ? b : cudaFree(p);", 8, 16));
        assert!(discarded_call(b"else cudaFree(f(g(h(1))));", 5, 13));
        assert!(!discarded_call(b"::cudaFree(p);", 2, 10));
    }

    #[test]
    fn defines() {
        let mut out = Vec::new();
        define_names(
            b"#define A 1\n# define\tB_2\n#define\n#definex C\n##define D",
            &mut out,
        );
        assert_eq!(out, vec![b"A".to_vec(), b"B_2".to_vec(), b"D".to_vec()]);
    }
}
