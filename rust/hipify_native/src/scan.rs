//! Token recognisers for the hipify scanner, each equal to one alternative of the reference regex in
//! tools/hipify/translate.py (`_build_scanner_source`, compiled with `re.S`). Each takes the input and
//! the offset of the token's first byte and returns the offset just past the token (or `None` where the
//! regex alternative does not match there). The differential tests in tests/hipify/test_native.py hold
//! the two engines to the same output.

/// Bytes that continue an identifier; bytes >= 0x80 count, so a name glued to UTF-8 is never split.
pub const IDC: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    t
};

/// `\` followed by something: how many bytes the escape takes (`\` CR LF is one unit), or `None` at the
/// end of the input (the regex's `\\(?:\r\n|.)` then fails and the token ends before the backslash).
#[inline]
fn escape_len(data: &[u8], at: usize) -> Option<usize> {
    if at + 1 >= data.len() {
        None
    } else if data[at + 1] == b'\r' && data.get(at + 2) == Some(&b'\n') {
        Some(3)
    } else {
        Some(2)
    }
}

/// `//...` (at = offset of the first `/`, data[at + 1] == `/`): to the end of the line; a backslash
/// continues it onto the next line.
pub fn line_comment_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 2;
    while j < data.len() {
        match data[j] {
            b'\n' => break,
            b'\\' => match escape_len(data, j) {
                Some(k) => j += k,
                None => break,
            },
            _ => j += 1,
        }
    }
    j
}

/// `/*...*/` (data[at + 1] == `*`): through the first `*/` after the opening `/*`; unterminated, to the
/// end of the input.
pub fn block_comment_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 2;
    while j + 1 < data.len() {
        if data[j] == b'*' && data[j + 1] == b'/' {
            return j + 2;
        }
        j += 1;
    }
    data.len()
}

/// `"..."` (data[at] == `"`): through the closing quote; an unterminated string stops before the newline.
pub fn string_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 1;
    while j < data.len() {
        match data[j] {
            b'"' => return j + 1,
            b'\n' => return j,
            b'\\' => match escape_len(data, j) {
                Some(k) => j += k,
                None => return j,
            },
            _ => j += 1,
        }
    }
    j
}

/// `'...'` (data[at] == `'`): as a string, but an escape is exactly one byte after the backslash.
pub fn char_end(data: &[u8], at: usize) -> usize {
    let mut j = at + 1;
    while j < data.len() {
        match data[j] {
            b'\'' => return j + 1,
            b'\n' => return j,
            b'\\' => {
                if j + 1 >= data.len() {
                    return j;
                }
                j += 2;
            }
            _ => j += 1,
        }
    }
    j
}

/// `R"delim(...)delim"` (data[at] == `R`, data[at + 1] == `"`): the end of the raw string, or `None` when
/// the delimiter is not followed by `(` (longer than 16 bytes, or a forbidden byte) or never closes.
pub fn raw_string_end(data: &[u8], at: usize) -> Option<usize> {
    let delim_start = at + 2;
    let mut k = delim_start;
    while k < data.len() && k - delim_start <= 16 && !b"()\\ \t\r\n\"".contains(&data[k]) {
        k += 1;
    }
    if k - delim_start > 16 || data.get(k) != Some(&b'(') {
        return None;
    }
    let delim = &data[delim_start..k];
    let mut j = k + 1;
    while j < data.len() {
        if data[j] == b')'
            && data[j + 1..].starts_with(delim)
            && data.get(j + 1 + delim.len()) == Some(&b'"')
        {
            return Some(j + 2 + delim.len());
        }
        j += 1;
    }
    None
}

/// An `#include` / `#include_next` directive at `at` (data[at] == `#`): (path start, path end, angled,
/// directive end), as `#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\r\n]*)[>"]`.
pub fn include_at(data: &[u8], at: usize) -> Option<(usize, usize, bool, usize)> {
    let blank = |j: &mut usize| {
        while *j < data.len() && (data[*j] == b' ' || data[*j] == b'\t') {
            *j += 1;
        }
    };
    let mut j = at + 1;
    blank(&mut j);
    if !data[j..].starts_with(b"include") {
        return None;
    }
    j += 7;
    if data[j..].starts_with(b"_next") {
        j += 5;
    }
    blank(&mut j);
    let open = *data.get(j)?;
    if open != b'<' && open != b'"' {
        return None;
    }
    let pstart = j + 1;
    let mut k = pstart;
    while k < data.len() && !b">\"\r\n".contains(&data[k]) {
        k += 1;
    }
    match data.get(k) {
        Some(b'>') | Some(b'"') => Some((pstart, k, open == b'<', k + 1)),
        _ => None,
    }
}

/// Whether only white space (`strip(b" \t\r\f\v")`) precedes `at` on its line.
pub fn at_line_start(data: &[u8], at: usize) -> bool {
    let line_start = data[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    data[line_start..at]
        .iter()
        .all(|b| b" \t\r\x0c\x0b".contains(b))
}

/// Start of the run of identifier bytes that ends at `end`.
pub fn token_start(data: &[u8], end: usize) -> usize {
    let mut i = end;
    while i > 0 && IDC[data[i - 1] as usize] {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments() {
        assert_eq!(line_comment_end(b"// a\nb", 0), 4);
        assert_eq!(line_comment_end(b"// a\\\nb\nc", 0), 7);
        assert_eq!(line_comment_end(b"// a\\\r\nb\nc", 0), 8);
        assert_eq!(line_comment_end(b"// a\\", 0), 4); // a trailing backslash is not part of it
        assert_eq!(block_comment_end(b"/* a */ b", 0), 7);
        assert_eq!(block_comment_end(b"/*/ */", 0), 6);
        assert_eq!(block_comment_end(b"/**/", 0), 4);
        assert_eq!(block_comment_end(b"/* open", 0), 7);
    }

    #[test]
    fn literals() {
        assert_eq!(string_end(b"\"a\\\"b\" c", 0), 6);
        assert_eq!(string_end(b"\"open\nx", 0), 5);
        assert_eq!(string_end(b"\"a\\", 0), 2);
        assert_eq!(char_end(b"'\\''", 0), 4);
        assert_eq!(char_end(b"'x", 0), 2);
        assert_eq!(raw_string_end(b"R\"x()\")x\" tail", 0), Some(9));
        assert_eq!(raw_string_end(b"R\"(a)\"", 0), Some(6));
        assert_eq!(raw_string_end(b"R\"abc", 0), None);
        assert_eq!(raw_string_end(b"R\"(never", 0), None);
        assert_eq!(
            raw_string_end(b"R\"12345678901234567(x)12345678901234567\"", 0),
            None
        );
    }

    #[test]
    fn includes() {
        assert_eq!(include_at(b"#include <a.h>", 0), Some((10, 13, true, 14)));
        assert_eq!(
            include_at(b"# include_next \"b.h\"", 0),
            Some((16, 19, false, 20))
        );
        assert_eq!(include_at(b"#includex <a.h>", 0), None);
        assert_eq!(include_at(b"#include <a.h\n>", 0), None);
        assert!(at_line_start(b"x\n  \t#", 5));
        assert!(!at_line_start(b"x #", 2));
    }
}
