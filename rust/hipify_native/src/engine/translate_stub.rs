//! TEMPORARY stand-ins for helper B's engine::masks and engine::downgrade (the API their brief names), until
//! they land; removed then.

use crate::scan::FxMap;

pub const FULL32: &str = "full32";
pub const FULL64: &str = "full64";
pub const ACTIVE: &str = "active";
pub const ACTIVE32: &str = "active32";
pub const PARTIAL: &str = "partial";
pub const RUNTIME: &str = "runtime";

pub const UPPER_LANES: &str = "0xffffffff00000000ULL";

pub const MASKED: &[&[u8]] = &[
    b"__shfl_sync",
    b"__shfl_up_sync",
    b"__shfl_down_sync",
    b"__shfl_xor_sync",
    b"__ballot_sync",
    b"__any_sync",
    b"__all_sync",
    b"__match_any_sync",
    b"__match_all_sync",
    b"__syncwarp",
    b"__reduce_add_sync",
    b"__reduce_min_sync",
    b"__reduce_max_sync",
    b"__reduce_and_sync",
    b"__reduce_or_sync",
    b"__reduce_xor_sync",
];

/// name -> (how, (value, width, signed))
pub type Known = FxMap<Vec<u8>, (String, (u64, u32, bool))>;

pub struct Mask {
    pub cls: &'static str,
    pub how: String,
    pub unresolved: Vec<u8>,
}

pub fn classify(_data: &[u8], _call_start: usize, mask: &[u8], _known: &Known) -> Mask {
    Mask {
        cls: RUNTIME,
        how: format!(
            "{} is computed at run time",
            crate::engine::types::latin1(mask)
        ),
        unresolved: Vec::new(),
    }
}

pub fn is_name(text: &[u8]) -> bool {
    let t = text.trim_ascii();
    !t.is_empty()
        && (t[0].is_ascii_alphabetic() || t[0] == b'_')
        && t.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

pub fn first_argument(data: &[u8], end: usize) -> Option<(usize, usize)> {
    let n = data.len();
    let mut i = end;
    while i < n && b" \t\r\n".contains(&data[i]) {
        i += 1;
    }
    if i >= n || data[i] != b'(' {
        return None;
    }
    let mut depth = 0i32;
    let mut j = i + 1;
    while j < n {
        let c = data[j];
        if b"([{".contains(&c) {
            depth += 1;
        } else if b")]}".contains(&c) {
            if depth == 0 {
                break;
            }
            depth -= 1;
        } else if c == b',' && depth == 0 {
            break;
        } else if c == b'"' || c == b'\'' {
            let mut k = j + 1;
            while k < n && data[k] != c && data[k] != b'\n' {
                k += if data[k] == b'\\' { 2 } else { 1 };
            }
            j = k;
        } else if c == b';' {
            return None;
        }
        j += 1;
    }
    if j >= n {
        return None;
    }
    let (mut a, mut b) = (i + 1, j);
    while a < b && b" \t\r\n".contains(&data[a]) {
        a += 1;
    }
    while b > a && b" \t\r\n".contains(&data[b - 1]) {
        b -= 1;
    }
    (a < b).then_some((a, b))
}

pub struct Downgrade {
    pub cuda_name: Vec<u8>,
    pub below: Vec<u32>,
    pub replacement: Vec<u8>,
    pub action: String,
}

pub fn rewrite_call(data: &[u8], end: usize, dg: &Downgrade) -> Option<(Vec<u8>, usize)> {
    let n = data.len();
    let mut i = end;
    while i < n && (data[i] == b' ' || data[i] == b'\t') {
        i += 1;
    }
    if i >= n || data[i] != b'(' {
        return None;
    }
    let mut depth = 0i32;
    let mut first_comma: Option<usize> = None;
    let mut j = i;
    loop {
        if j >= n {
            return None;
        }
        let c = data[j];
        if b"([{".contains(&c) {
            depth += 1;
        } else if b")]}".contains(&c) {
            depth -= 1;
            if depth == 0 {
                break;
            }
        } else if c == b',' && depth == 1 && first_comma.is_none() {
            first_comma = Some(j);
        } else if c == b';' && depth <= 1 {
            return None;
        }
        j += 1;
    }
    match dg.action.as_str() {
        "call" => {
            if data[i + 1..j]
                .iter()
                .any(|c| !b" \t\n\r\x0b\x0c".contains(c))
            {
                return None;
            }
            Some((dg.replacement.clone(), j + 1))
        }
        "replace-call" => Some((dg.replacement.clone(), j + 1)),
        _ => {
            let fc = first_comma?;
            let mut k = fc + 1;
            while k < j && (data[k] == b' ' || data[k] == b'\t') {
                k += 1;
            }
            let mut t = dg.replacement.clone();
            t.push(b'(');
            Some((t, k))
        }
    }
}

pub const RUNTIME_HEADER: &[u8] = b"hip/hip_runtime.h";
pub const RUNTIME_API_HEADER: &[u8] = b"hip/hip_runtime_api.h";

pub fn defines_and_lines(data: &[u8], sync_macro: Option<&[u8]>) -> u32 {
    use crate::engine::types::facts;
    let mut out = 0;
    if let Some(m) = sync_macro.filter(|m| !m.is_empty()) {
        let mut ls = 0;
        for line in data.split(|&b| b == b'\n') {
            let _ = ls;
            ls += line.len() + 1;
            let mut j = 0;
            let blank = |j: &mut usize| {
                while *j < line.len() && (line[*j] == b' ' || line[*j] == b'\t') {
                    *j += 1;
                }
            };
            blank(&mut j);
            if !line[j..].starts_with(b"#") {
                continue;
            }
            j += 1;
            blank(&mut j);
            if !line[j..].starts_with(b"define") {
                continue;
            }
            j += 6;
            let k = j;
            blank(&mut j);
            if j == k || !line[j..].starts_with(m) {
                continue;
            }
            let after = line.get(j + m.len());
            if after.is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_')) {
                out |= facts::DEFINES_SYNC;
                break;
            }
        }
    }
    if let Some(nl) = memchr::memchr(b'\n', data) {
        if nl > 0 && data[nl - 1] == b'\r' {
            out |= facts::CRLF;
        }
    }
    out
}

pub fn positions(
    data: &[u8],
    offsets: &[usize],
) -> std::collections::HashMap<usize, (usize, usize)> {
    let mut out = std::collections::HashMap::new();
    for &off in offsets {
        let to = off.min(data.len());
        let line = 1 + memchr::memchr_iter(b'\n', &data[..to]).count();
        let ls = memchr::memrchr(b'\n', &data[..to]).map_or(0, |p| p + 1);
        out.insert(off, (line, off - ls + 1));
    }
    out
}
