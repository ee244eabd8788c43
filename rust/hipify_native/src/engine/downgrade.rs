//! tools/hipify/downgrade.py's Downgrade record and rewrite_call in Rust: for a target HIP older than the
//! one that added a CUDA name, the call is rewritten to what that older HIP has (data/downgrades.tsv).
//! Which downgrades apply is decided by Python (load_downgrades, the plan); this only rewrites a call.

use serde::Deserialize;

/// What a downgrade does to the call (downgrade.py's ACTIONS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub enum Action {
    /// `name(mask, rest...)` -> `replacement(rest...)`
    #[serde(rename = "drop-first-arg")]
    DropFirstArg,
    /// `name()` -> `replacement` (a complete expression)
    #[serde(rename = "call")]
    Call,
    /// `name(anything)` -> `replacement`
    #[serde(rename = "replace-call")]
    ReplaceCall,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::DropFirstArg => "drop-first-arg",
            Action::Call => "call",
            Action::ReplaceCall => "replace-call",
        }
    }

    pub fn from_str(text: &str) -> Option<Action> {
        Some(match text {
            "drop-first-arg" => Action::DropFirstArg,
            "call" => Action::Call,
            "replace-call" => Action::ReplaceCall,
            _ => return None,
        })
    }
}

/// downgrade.py's Downgrade. JSON: `[cuda_name, [major, minor, ...], replacement, action]` or the object
/// `{"cuda_name": ..., "below": [...], "replacement": ..., "action": ...}` (strings are Latin-1 text;
/// `below` takes the version's first two parts, a missing minor is 0).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
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
    let text = String::deserialize(d)?;
    super::types::from_latin1(&text)
        .ok_or_else(|| serde::de::Error::custom("a downgrade's text has a char >= 256"))
}

fn de_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(u32, u32), D::Error> {
    let parts = Vec::<u32>::deserialize(d)?;
    match parts.as_slice() {
        [] => Err(serde::de::Error::custom("an empty version")),
        [major] => Ok((*major, 0)),
        [major, minor, ..] => Ok((*major, *minor)),
    }
}

/// For the name ending at `end`: (text replacing `data[start..resume]`, resume offset), or None when the
/// call cannot be parsed (then the name is left to the normal version check) (rewrite_call).
pub fn rewrite_call(data: &[u8], end: usize, dg: &Downgrade) -> Option<(Vec<u8>, usize)> {
    let n = data.len();
    let mut i = end;
    while i < n && (data[i] == b' ' || data[i] == b'\t') {
        i += 1;
    }
    if i >= n || data[i] != b'(' {
        return None;
    }
    let mut depth: i64 = 0;
    let mut first_comma: Option<usize> = None;
    let mut j = i;
    loop {
        if j >= n {
            return None; // the while loop's else
        }
        match data[j] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 && first_comma.is_none() => first_comma = Some(j),
            b';' if depth <= 1 => return None,
            _ => {}
        }
        j += 1;
    }
    match dg.action {
        Action::Call => {
            if data[i + 1..j]
                .iter()
                .any(|&c| c != b' ' && !(0x09..=0x0d).contains(&c))
            {
                return None;
            }
            Some((dg.replacement.clone(), j + 1))
        }
        Action::ReplaceCall => Some((dg.replacement.clone(), j + 1)),
        Action::DropFirstArg => {
            let first_comma = first_comma?;
            let mut k = first_comma + 1;
            while k < j && (data[k] == b' ' || data[k] == b'\t') {
                k += 1;
            }
            let mut text = Vec::with_capacity(dg.replacement.len() + 1);
            text.extend_from_slice(&dg.replacement);
            text.push(b'(');
            Some((text, k))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_forms() {
        let a: Downgrade =
            serde_json::from_str(r#"["__shfl_sync", [6, 2], "__shfl", "drop-first-arg"]"#).unwrap();
        let b: Downgrade = serde_json::from_str(
            r#"{"cuda_name": "__shfl_sync", "below": [6, 2, 0], "replacement": "__shfl", "action": "drop-first-arg"}"#,
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.below, (6, 2));
        assert_eq!(a.action, Action::DropFirstArg);
    }

    #[test]
    fn rewrites() {
        let dg = Downgrade {
            cuda_name: b"__shfl_down_sync".to_vec(),
            below: (6, 2),
            replacement: b"__shfl_down".to_vec(),
            action: Action::DropFirstArg,
        };
        let data = b"__shfl_down_sync(__activemask(), v, 16);";
        assert_eq!(
            rewrite_call(data, 16, &dg),
            Some((b"__shfl_down(".to_vec(), 33))
        );
    }
}
