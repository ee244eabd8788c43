//! tools/hipify/lint.py's lint_bytes and silenced in Rust, over crate::lint's candidate scanner, plus
//! translate.py's positions and line_starts.
//!
//! The rules are lint.py's: `LintPlan` is deserialised from `lint.export_plan()` (patterns, texts, checks,
//! markers, context regexes); what each check kind does is lint_bytes's code, followed here step by step.
//! The regexes are Python's, run by the `regex` crate in ASCII mode (`(?-u)`: `\s`, `\w`, `\d`, `\b` as
//! Python's bytes patterns have them; `\Z` becomes `\z`; the trailing look-aheads were split off by
//! lint.py's `_for_native`).

use std::collections::{HashMap, HashSet};

use memchr::{memchr, memchr_iter, memmem, memrchr};
use regex::bytes::Regex;
use serde::Deserialize;

use super::types::{from_latin1, RawFinding};
use crate::lint::Candidates;

/// One pattern of a rule, as `lint.export_plan()` gives it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintRuleJson {
    pub rule: String,
    pub pattern: String,
    pub not_next: String,
    pub needle: String,
    pub device_only: bool,
    pub reason: String,
    pub suggestion: String,
    pub blocking: bool,
    pub check: String,
}

/// `lint.export_plan()`, as serialised.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintPlanJson {
    pub rules: Vec<LintRuleJson>,
    pub device_markers: Vec<String>,
    pub device_file_markers: Vec<String>,
    pub silence_marker: String,
    pub context: String,
    pub context_no_loop: String,
    pub ballot_lhs: String,
    pub end_owner: String,
    pub end_dropped: String,
    pub name_max: usize,
}

/// lint_bytes's check kinds
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Word,
    Ctx,
    CtxAny,
    Ballot,
    Asm,
}

struct Rule {
    rule: String,
    reason: Vec<u8>,
    suggestion: Vec<u8>,
    blocking: bool,
    check: Check,
    /// its match ends are recorded (lane-math)
    owns_end: bool,
    /// a match ending where a recorded one ends is dropped (warp-size-literal)
    dropped_at_end: bool,
}

/// The lint's rules, compiled once (deserialise it from `lint.export_plan()`'s JSON; `LintPlan::new`
/// from the parsed form).
#[derive(Deserialize)]
#[serde(try_from = "LintPlanJson")]
pub struct LintPlan {
    rules: Vec<Rule>,
    scanner: Candidates,
    context: Regex,
    context_no_loop: Regex,
    ballot_lhs: Regex,
    name_max: usize,
}

impl std::fmt::Debug for LintPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LintPlan")
            .field("patterns", &self.rules.len())
            .finish_non_exhaustive()
    }
}

impl TryFrom<LintPlanJson> for LintPlan {
    type Error = String;
    fn try_from(plan: LintPlanJson) -> Result<Self, String> {
        LintPlan::new(plan)
    }
}

fn bytes(what: &str, text: &str) -> Result<Vec<u8>, String> {
    from_latin1(text).ok_or_else(|| format!("lint plan: {what} {text:?} is not Latin-1"))
}

/// A Python `re` pattern (bytes) as the `regex` crate takes it: ASCII classes, `\Z` as `\z`.
fn rust_regex(source: &str) -> Result<Regex, String> {
    let mut out = String::with_capacity(source.len() + 5);
    out.push_str("(?-u)");
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '\\' {
            match chars.next() {
                Some('Z') => {
                    out.pop();
                    out.push_str("\\z");
                }
                Some(n) => out.push(n),
                None => {}
            }
        }
    }
    Regex::new(&out).map_err(|e| format!("lint plan: regex {source:?}: {e}"))
}

impl LintPlan {
    /// Compiles the plan: every pattern and context regex (an error says which is wrong).
    pub fn new(plan: LintPlanJson) -> Result<Self, String> {
        let mut rules = Vec::with_capacity(plan.rules.len());
        let mut patterns = Vec::with_capacity(plan.rules.len());
        for r in plan.rules {
            let check = match r.check.as_str() {
                "word" => Check::Word,
                "ctx" => Check::Ctx,
                "ctx-any" => Check::CtxAny,
                "ballot" => Check::Ballot,
                "asm" => Check::Asm,
                other => {
                    return Err(format!(
                        "lint plan: rule {}: unknown check {other:?}",
                        r.rule
                    ))
                }
            };
            patterns.push((
                r.pattern,
                bytes("not_next", &r.not_next)?,
                bytes("needle", &r.needle)?,
                r.device_only,
            ));
            rules.push(Rule {
                owns_end: r.rule == plan.end_owner,
                dropped_at_end: r.rule == plan.end_dropped,
                reason: bytes("reason", &r.reason)?,
                suggestion: bytes("suggestion", &r.suggestion)?,
                blocking: r.blocking,
                check,
                rule: r.rule,
            });
        }
        if plan.device_file_markers.len() > 63 {
            return Err("lint plan: too many device-file markers".into());
        }
        let device_markers = plan
            .device_markers
            .iter()
            .map(|m| bytes("device marker", m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut markers = vec![bytes("silence marker", &plan.silence_marker)?];
        for m in &plan.device_file_markers {
            markers.push(bytes("device-file marker", m)?);
        }
        let scanner = Candidates::new(patterns, device_markers, markers);
        scanner.compile_all()?;
        Ok(LintPlan {
            rules,
            scanner,
            context: rust_regex(&plan.context)?,
            context_no_loop: rust_regex(&plan.context_no_loop)?,
            ballot_lhs: rust_regex(&plan.ballot_lhs)?,
            name_max: plan.name_max,
        })
    }

    /// `LintPlan::new` from `lint.export_plan()`'s JSON text.
    pub fn from_json(json: &str) -> Result<Self, String> {
        serde_json::from_str(json).map_err(|e| format!("lint plan: {e}"))
    }
}

/// lint.py's _IDC: identifier bytes (ASCII word bytes and every byte >= 0x80)
#[inline]
fn idc(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Python's `str.isspace()` for a char < 256 (what `str.strip()` drops)
#[inline]
fn py_str_space(b: u8) -> bool {
    matches!(b, 0x09..=0x0d | 0x1c..=0x1f | 0x20 | 0x85 | 0xa0)
}

/// bytes.strip()'s whitespace
#[inline]
fn ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// lint.py's _line: (the start of the line at `offset`, the line without its newline)
fn line_at(code: &[u8], offset: usize) -> (usize, &[u8]) {
    let offset = offset.min(code.len());
    let ls = memrchr(b'\n', &code[..offset]).map_or(0, |i| i + 1);
    let le = memchr(b'\n', &code[offset..]).map_or(code.len(), |i| offset + i);
    (ls, &code[ls..le])
}

/// lint.py's lint_bytes: the hazards in one file, sorted by offset (stable: rule order among equals).
/// `spans`: its comments and literals (the translator's), sorted.
pub fn lint_bytes(plan: &LintPlan, data: &[u8], spans: &[(usize, usize)]) -> Vec<RawFinding> {
    let mut matches = Vec::new();
    let Ok((_device, found)) = plan.scanner.scan_into(data, &mut matches) else {
        unreachable!("LintPlan::new compiled every pattern")
    };
    let mut out = Vec::new();
    if matches.is_empty() {
        return out;
    }
    let may_silence = found & 1 != 0;
    let device_file = found & !1 != 0;
    let code = data;
    let in_literal = |offset: usize| {
        let i = spans.partition_point(|&(a, _)| a <= offset);
        i > 0 && offset < spans[i - 1].1
    };
    let context = if device_file {
        &plan.context
    } else {
        &plan.context_no_loop
    };
    let mut owned_ends: HashSet<usize> = HashSet::new();
    for &(index, match_start, end) in &matches {
        let mut start = match_start; // the rule checks may move it back (ballot, asm)
        let r = &plan.rules[index];
        if in_literal(start) {
            continue;
        }
        if r.owns_end {
            owned_ends.insert(end);
        } else if r.dropped_at_end && owned_ends.contains(&end) {
            continue;
        }
        let mut prev = if start > 0 { code[start - 1] } else { b' ' };
        if r.check == Check::Word && idc(prev) {
            continue;
        }
        match r.check {
            Check::Ctx | Check::CtxAny => {
                if r.check == Check::Ctx && (idc(prev) || prev == b'.') {
                    continue; // int32_t, 1.32
                }
                let (_ls, line) = line_at(code, start);
                let re = if r.check == Check::Ctx {
                    context
                } else {
                    &plan.context_no_loop
                };
                if !re.is_match(line) {
                    continue;
                }
            }
            Check::Ballot => {
                if idc(prev) {
                    continue;
                }
                let (ls, _line) = line_at(code, start);
                // re.search(code, ls, start): the window ends at `start` (\Z there), the bytes before ls
                // are its context (a \b at ls)
                let Some(lhs) = plan.ballot_lhs.find_at(&code[..start], ls) else {
                    continue;
                };
                start = lhs.start();
            }
            Check::Asm => {
                if start >= 2 && &code[start - 2..start] == b"__" {
                    start -= 2;
                    prev = if start > 0 { code[start - 1] } else { b' ' };
                }
                if idc(prev) {
                    continue;
                }
            }
            Check::Word => {}
        }
        if may_silence && silenced(data, start, &r.rule) {
            continue;
        }
        out.push(RawFinding {
            offset: start,
            name: finding_name(&code[start..end.max(start)], plan.name_max),
            kind: "hazard".to_string(),
            reason: r.reason.clone(),
            suggestion: r.suggestion.clone(),
            blocking: r.blocking,
            rule: r.rule.clone(),
        });
    }
    out.sort_by_key(|f| f.offset);
    out
}

/// `text = code[start:end].decode("latin-1").strip(); text if len(text) <= max else text[:max-3] + "..."`
fn finding_name(text: &[u8], max: usize) -> Vec<u8> {
    let mut a = 0;
    let mut b = text.len();
    while a < b && py_str_space(text[a]) {
        a += 1;
    }
    while b > a && py_str_space(text[b - 1]) {
        b -= 1;
    }
    let text = &text[a..b];
    if text.len() <= max {
        return text.to_vec();
    }
    let mut name = text[..max.saturating_sub(3)].to_vec();
    name.extend_from_slice(b"...");
    name
}

/// `bytes.decode("latin-1") == text`
fn latin1_eq(bytes: &[u8], text: &str) -> bool {
    let mut chars = text.chars();
    bytes.iter().all(|&b| chars.next() == Some(char::from(b))) && chars.next().is_none()
}

/// lint.py's silenced: whether a `hipify: ignore` comment on the line of `offset` silences `rule`
/// (`hipify: ignore` alone silences every rule; `hipify: ignore(a, b)` the rules named). Follows
/// `re.finditer(rb"hipify:\s*ignore(?:\(([^)]*)\))?", line)`.
pub fn silenced(data: &[u8], offset: usize, rule: &str) -> bool {
    let (_ls, line) = line_at(data, offset);
    let finder = memmem::Finder::new(b"hipify:");
    let mut from = 0;
    while let Some(k) = finder.find(&line[from..]) {
        let at = from + k;
        let mut p = at + 7;
        while p < line.len() && ascii_space(line[p]) {
            p += 1;
        }
        if !line[p..].starts_with(b"ignore") {
            from = at + 1;
            continue;
        }
        p += 6;
        let group = if p < line.len() && line[p] == b'(' {
            memchr(b')', &line[p + 1..]).map(|c| (p + 1, p + 1 + c))
        } else {
            None
        };
        let Some((gs, ge)) = group else {
            return true; // no rule list: every rule
        };
        let named = line[gs..ge].split(|&b| b == b',').any(|r| {
            let mut a = 0;
            let mut b = r.len();
            while a < b && ascii_space(r[a]) {
                a += 1;
            }
            while b > a && ascii_space(r[b - 1]) {
                b -= 1;
            }
            latin1_eq(&r[a..b], rule)
        });
        if named {
            return true;
        }
        from = ge + 1;
    }
    false
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"{"rules": [
        {"rule": "lane-math", "pattern": "%\\s*32", "not_next": "_.", "needle": "%", "device_only": true,
         "reason": "r1", "suggestion": "s1", "blocking": true, "check": "ctx-any"},
        {"rule": "warp-size-literal", "pattern": "32", "not_next": "_.", "needle": "32", "device_only": true,
         "reason": "r2", "suggestion": "s2", "blocking": true, "check": "ctx"},
        {"rule": "inline-asm", "pattern": "asm\\s*\\(", "not_next": "", "needle": "asm", "device_only": false,
         "reason": "r3", "suggestion": "s3", "blocking": false, "check": "asm"}],
      "device_markers": ["__global__"], "device_file_markers": ["__global__"], "silence_marker": "hipify:",
      "context": "lane|\\bfor\\s*\\(", "context_no_loop": "lane", "ballot_lhs": "\\bint\\s*=\\s*\\Z",
      "end_owner": "lane-math", "end_dropped": "warp-size-literal", "name_max": 60}"#;

    #[test]
    fn lint() {
        let plan = LintPlan::from_json(PLAN).unwrap();
        let data =
            b"__global__ k() { lane % 32;\n x = 32;\n __asm__(\"\"); // hipify: ignore(inline-asm)\n}";
        let got: Vec<_> = lint_bytes(&plan, data, &[])
            .into_iter()
            .map(|f| (f.offset, f.name, f.rule))
            .collect();
        assert_eq!(got, vec![(22, b"% 32".to_vec(), "lane-math".to_string())]);
        assert!(LintPlan::from_json(&PLAN.replace("ctx-any", "other")).is_err());
    }

    #[test]
    fn ignore_comments() {
        assert!(silenced(b"x // hipify: ignore\n", 0, "a"));
        assert!(silenced(b"x // hipify:ignore( a , b)", 0, "b"));
        assert!(!silenced(b"x // hipify: ignore(a)\ny", 23, "a"));
        assert!(!silenced(b"hipify: ignore(hipify: ignore)", 0, "a"));
        assert!(silenced(b"hipify: ignore(a", 0, "b"));
    }

    #[test]
    fn lines() {
        assert_eq!(line_starts(b"a\nb\r\n"), vec![0, 2, 5]);
        let p = positions(b"ab\ncd", &[4, 0, 9]);
        assert_eq!((p[&0], p[&4], p[&9]), ((1, 1), (2, 2), (2, 7)));
    }
}
