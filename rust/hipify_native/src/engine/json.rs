//! JSON text exactly as Python's `json.dumps` writes it (ensure_ascii): strings, and the two layouts the tree
//! pass uses, compact (`separators=(",", ":")`) and `indent=1`.

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_u(out: &mut Vec<u8>, unit: u32) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[((unit >> shift) & 0xf) as usize]);
    }
}

/// A string as `json.dumps` writes it (with its quotes): `\"`, `\\`, the short escapes, and `\uXXXX` (lower
/// case, surrogate pairs beyond the BMP) for everything outside ` `..`~`.
pub fn string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut plain = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\' {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[plain..i]);
        let c = text[i..].chars().next().expect("a char starts here");
        i += c.len_utf8();
        plain = i;
        let code = c as u32;
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            _ if code >= 0x10000 => {
                let v = code - 0x10000;
                push_u(out, 0xd800 | (v >> 10));
                push_u(out, 0xdc00 | (v & 0x3ff));
            }
            _ => push_u(out, code),
        }
    }
    out.extend_from_slice(&bytes[plain..]);
    out.push(b'"');
}

/// An integer as Python writes it.
pub fn int(out: &mut Vec<u8>, value: i64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut v = value.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[at..]);
}

pub fn boolean(out: &mut Vec<u8>, value: bool) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
}

/// `repr(float)` for the values the report has (`round(seconds, 4)`): shortest round trip, `.0` for
/// integral values.
pub fn float(out: &mut Vec<u8>, value: f64) {
    let mut s = format!("{value}");
    if value.is_finite() && !s.contains('.') && !s.contains('e') {
        s.push_str(".0");
    }
    out.extend_from_slice(s.as_bytes());
}

/// A value for `indent=1` output (insertion-ordered objects).
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// `json.dumps(value, indent=1)`.
pub fn dumps_indent1(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_indent(&mut out, value, 0);
    out
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.resize(out.len() + depth, b' ');
}

fn write_indent(out: &mut Vec<u8>, value: &Value, depth: usize) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => boolean(out, *b),
        Value::Int(i) => int(out, *i),
        Value::Float(f) => float(out, *f),
        Value::Str(s) => string(out, s),
        Value::List(items) => {
            if items.is_empty() {
                out.extend_from_slice(b"[]");
                return;
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, depth + 1);
                write_indent(out, item, depth + 1);
            }
            newline(out, depth);
            out.push(b']');
        }
        Value::Object(items) => {
            if items.is_empty() {
                out.extend_from_slice(b"{}");
                return;
            }
            out.push(b'{');
            for (i, (key, item)) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, depth + 1);
                string(out, key);
                out.extend_from_slice(b": ");
                write_indent(out, item, depth + 1);
            }
            newline(out, depth);
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_like_python() {
        let mut out = Vec::new();
        string(&mut out, "a\"b\\c\n\u{1}\u{7f}é\u{1F600}~");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00~""#
        );
    }

    #[test]
    fn indent_layout() {
        let v = Value::Object(vec![
            ("a".into(), Value::List(vec![Value::Int(1), Value::Null])),
            ("b".into(), Value::Object(vec![])),
            ("c".into(), Value::List(vec![])),
            ("d".into(), Value::Float(0.0)),
        ]);
        assert_eq!(
            String::from_utf8(dumps_indent1(&v)).unwrap(),
            "{\n \"a\": [\n  1,\n  null\n ],\n \"b\": {},\n \"c\": [],\n \"d\": 0.0\n}"
        );
    }
}
