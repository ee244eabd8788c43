//! TEMPORARY stand-ins for helper B's engine::masks and engine::downgrade (the API their brief names), until
//! they land; removed then.

use crate::scan::FxMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Full32,
    Full64,
    Active,
    Active32,
    Partial,
    Runtime,
}

pub const UPPER_LANES: &str = "0xffffffff00000000ULL";

pub fn is_masked(name: &[u8]) -> bool {
    MASKED.contains(&name)
}

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

pub type Value = (u64, u32, bool);

#[derive(Clone, Debug, Default)]
pub struct Known {
    map: FxMap<Vec<u8>, (Vec<u8>, Value)>,
}

pub struct ProjectMask {
    pub name: Vec<u8>,
    pub how: Vec<u8>,
    pub value: u64,
    pub width: u32,
    pub signed: bool,
}

pub fn known_masks(table: &[ProjectMask]) -> Known {
    let mut map = FxMap::default();
    for row in table {
        map.insert(
            row.name.clone(),
            (row.how.clone(), (row.value, row.width, row.signed)),
        );
    }
    Known { map }
}

pub struct Mask {
    pub cls: Class,
    pub how: Vec<u8>,
    pub unresolved: Option<Vec<u8>>,
}

pub fn classify(_data: &[u8], _call_start: usize, mask: &[u8], known: &Known) -> Mask {
    let _ = known.map.len();
    let mut how = mask.to_vec();
    how.extend_from_slice(b" is computed at run time");
    Mask {
        cls: Class::Runtime,
        how,
        unresolved: None,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub enum Action {
    #[serde(rename = "drop-first-arg")]
    DropFirstArg,
    #[serde(rename = "call")]
    Call,
    #[serde(rename = "replace-call")]
    ReplaceCall,
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct Downgrade {
    #[serde(deserialize_with = "de_latin1")]
    pub cuda_name: Vec<u8>,
    #[serde(deserialize_with = "de_version")]
    pub below: (u32, u32),
    #[serde(deserialize_with = "de_latin1")]
    pub replacement: Vec<u8>,
    pub action: Action,
}

fn de_latin1<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    crate::engine::types::from_latin1(&text).ok_or_else(|| serde::de::Error::custom("char >= 256"))
}

fn de_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(u32, u32), D::Error> {
    let parts = <Vec<u32> as serde::Deserialize>::deserialize(d)?;
    match parts.as_slice() {
        [] => Err(serde::de::Error::custom("an empty version")),
        [major] => Ok((*major, 0)),
        [major, minor, ..] => Ok((*major, *minor)),
    }
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
    match dg.action {
        Action::Call => {
            if data[i + 1..j]
                .iter()
                .any(|c| !b" \t\n\r\x0b\x0c".contains(c))
            {
                return None;
            }
            Some((dg.replacement.clone(), j + 1))
        }
        Action::ReplaceCall => Some((dg.replacement.clone(), j + 1)),
        Action::DropFirstArg => {
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
