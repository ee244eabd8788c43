//! tools/hipify/translate.py's per-file pass (`Translator.translate`) in Rust, driven by the plan that
//! `Translator.export_plan()` writes: every decision the Python Translator derives from the database, the
//! target and the options is looked up in it (per-name actions and header actions with their finding texts,
//! the scanner's prefixes, the downgrades, the target facts); what depends on the file is ported here, each
//! function naming the Python it follows (the context checks in translate_ctx.rs, the launch conversion in
//! translate_launch.rs). The scan itself is crate::scan's `walk`, the loop the Python-callback scanner uses too.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;

use super::insert;
use super::translate_ctx::{
    cuda_looking, cuda_only_header, define_names, discarded_call, is_declaration, is_member,
    line_start, lstrip_blanks, namespace_context,
};
use super::translate_launch::convert_launches;
use super::translate_names::{Action, NameTable, DOWNGRADE, MASKED, NONE, NS, SIMPLE, STMT, SYNC};
use super::types::{facts, from_latin1, latin1, FileResult, Include, RawFinding};
use super::{downgrade, masks};
use crate::scan::{maybe_statement, walk, Decider, FxMap, Prefixes, Walk};
use downgrade::{rewrite_call, Action as DgAction, Downgrade};
use masks::Class;

pub use masks::{known_masks, Known, ProjectMask};

/// The plan format this module reads (`export_plan()["format"]`).
pub const PLAN_FORMAT: u32 = 1;

/// `Translator.export_plan()`'s JSON (see its docstring for the rows' layout). Texts are Python `str`s of
/// Latin-1 bytes.
#[derive(Deserialize, Debug, Clone)]
pub struct TranslatePlan {
    pub format: u32,
    /// `format_version(target.version) or "(newest)"`, for finding texts
    pub target_label: String,
    pub report_unmapped: bool,
    pub launch: bool,
    pub translate_comments_and_strings: bool,
    pub mask64: Option<String>,
    pub sync_define: Option<String>,
    pub nodiscard: Option<String>,
    pub prefixes: Vec<String>,
    pub texts: Vec<String>,
    /// (kind, reason, suggestion: indices into `texts`; flags: 1 blocking, 2 templated)
    pub findings: Vec<(u32, u32, u32, u8)>,
    /// rows (name, replacement, finding or -1, flags: 1 namespace-only, 2 sync, 4 stmt, 8 downgrade), as a
    /// table (built while parsing: start-up time)
    #[serde(deserialize_with = "de_names")]
    pub names: Arc<NameTable>,
    /// (path, replacement ("" drops the include), finding or -1)
    pub headers: Vec<(String, Option<String>, i32)>,
    /// the finding of a CUDA-looking name no table has (-1: none)
    pub unmapped: i32,
    /// the finding of a CUDA-only header no table has
    pub cuda_only_header: i32,
    /// `[cuda_name, [major, minor], replacement, action]`
    pub downgrades: Vec<Downgrade>,
}

fn de_names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<NameTable>, D::Error> {
    NameTable::deserialize(d).map(Arc::new)
}

impl TranslatePlan {
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("bad translate plan: {e}"))
    }
}

/// A finding's texts (translate.py `_FindingSpec`); with `templated`, each NUL byte of the reason and the
/// suggestion stands for the name the finding is reported on.
struct Spec {
    kind: String,
    reason: Vec<u8>,
    suggestion: Vec<u8>,
    blocking: bool,
    templated: bool,
}

impl Spec {
    fn fill(text: &[u8], templated: bool, name: &[u8]) -> Vec<u8> {
        if !templated || !text.contains(&0) {
            return text.to_vec();
        }
        let mut out = Vec::with_capacity(text.len() + name.len());
        for &b in text {
            if b == 0 {
                out.extend_from_slice(name);
            } else {
                out.push(b);
            }
        }
        out
    }

    fn finding(&self, offset: usize, name: &[u8], rule: &str) -> RawFinding {
        RawFinding {
            offset,
            name: name.to_vec(),
            kind: self.kind.clone(),
            reason: Spec::fill(&self.reason, self.templated, name),
            suggestion: Spec::fill(&self.suggestion, self.templated, name),
            blocking: self.blocking,
            rule: rule.to_string(),
        }
    }
}

/// `header_action`: (replacement path, empty to drop the include; finding)
type HeaderAction = (Option<Box<[u8]>>, Option<u32>);

/// Everything that comes from the plan (shared by translators that differ in their project masks).
struct Tables {
    prefixes: Prefixes,
    launch: bool,
    literals: bool,
    report_unmapped: bool,
    actions: Arc<NameTable>,
    headers: FxMap<Box<[u8]>, HeaderAction>,
    specs: Vec<Spec>,
    unmapped: Option<u32>,
    cuda_only_header: Option<u32>,
    downgrades: FxMap<Box<[u8]>, Downgrade>,
    mask64: Option<Vec<u8>>,
    sync_define: Option<Vec<u8>>,
    nodiscard: Vec<u8>,
    target_label: Vec<u8>,
}

/// translate.py's `Translator` for one plan and one set of project masks: immutable, `Send + Sync`.
#[derive(Clone)]
pub struct Translator {
    tables: Arc<Tables>,
    known: Arc<Known>,
}

fn bytes(text: &str, what: &str) -> Result<Vec<u8>, String> {
    if text.is_ascii() {
        return Ok(text.as_bytes().to_vec());
    }
    from_latin1(text).ok_or_else(|| format!("translate plan: {what} {text:?} is not Latin-1"))
}

fn index(k: i32, len: usize, what: &str) -> Result<Option<u32>, String> {
    if k < 0 {
        return Ok(None);
    }
    if k as usize >= len {
        return Err(format!(
            "translate plan: {what} refers to finding {k} of {len}"
        ));
    }
    Ok(Some(k as u32))
}

impl Translator {
    pub fn new(plan: &TranslatePlan, known: Known) -> Result<Self, String> {
        if plan.format != PLAN_FORMAT {
            return Err(format!(
                "translate plan format {} (this module reads {PLAN_FORMAT})",
                plan.format
            ));
        }
        let mut prefixes = Vec::with_capacity(plan.prefixes.len());
        for p in &plan.prefixes {
            prefixes.push(bytes(p, "prefix")?);
        }
        let prefixes = Prefixes::new(prefixes).ok_or("translate plan: an empty prefix")?;
        let text = |k: u32| -> Result<&str, String> {
            plan.texts
                .get(k as usize)
                .map(String::as_str)
                .ok_or_else(|| format!("translate plan: no text {k}"))
        };
        let mut specs = Vec::with_capacity(plan.findings.len());
        for &(kind, reason, sugg, flags) in &plan.findings {
            specs.push(Spec {
                kind: text(kind)?.to_string(),
                reason: bytes(text(reason)?, "finding text")?,
                suggestion: bytes(text(sugg)?, "finding text")?,
                blocking: flags & 1 != 0,
                templated: flags & 2 != 0,
            });
        }
        let nspecs = specs.len();
        let actions = Arc::clone(&plan.names);
        for act in actions.iter() {
            if act.finding >= nspecs as i32 {
                return Err(format!(
                    "translate plan: {} refers to finding {} of {nspecs}",
                    latin1(actions.name(act)),
                    act.finding
                ));
            }
        }
        let mut headers: FxMap<Box<[u8]>, HeaderAction> = FxMap::default();
        for (path, repl, finding) in &plan.headers {
            let finding = index(*finding, nspecs, path)?;
            let replacement = match repl {
                None => None,
                Some(r) => Some(bytes(r, "header")?.into_boxed_slice()),
            };
            headers.insert(
                bytes(path, "header")?.into_boxed_slice(),
                (replacement, finding),
            );
        }
        let mut downgrades: FxMap<Box<[u8]>, Downgrade> = FxMap::default();
        for dg in &plan.downgrades {
            downgrades.insert(dg.cuda_name.clone().into_boxed_slice(), dg.clone());
        }
        for act in actions.iter() {
            if act.flags & DOWNGRADE != 0 && !downgrades.contains_key(actions.name(act)) {
                return Err(format!(
                    "translate plan: {} has a downgrade the plan does not list",
                    latin1(actions.name(act))
                ));
            }
        }
        let opt = |t: &Option<String>| -> Result<Option<Vec<u8>>, String> {
            t.as_deref().map(|s| bytes(s, "target fact")).transpose()
        };
        let tables = Tables {
            prefixes,
            launch: plan.launch,
            literals: plan.translate_comments_and_strings,
            report_unmapped: plan.report_unmapped,
            actions,
            headers,
            unmapped: index(plan.unmapped, nspecs, "unmapped")?,
            cuda_only_header: index(plan.cuda_only_header, nspecs, "cuda_only_header")?,
            specs,
            downgrades,
            mask64: opt(&plan.mask64)?,
            sync_define: opt(&plan.sync_define)?,
            nodiscard: opt(&plan.nodiscard)?.unwrap_or_else(|| b"None".to_vec()),
            target_label: bytes(&plan.target_label, "target")?,
        };
        Ok(Translator {
            tables: Arc::new(tables),
            known: Arc::new(known),
        })
    }

    /// The same plan with other project masks (cheap: the tables are shared).
    pub fn with_masks(&self, known: Known) -> Self {
        Translator {
            tables: Arc::clone(&self.tables),
            known: Arc::new(known),
        }
    }

    /// `Translator.translate`: one file's bytes. A UTF-8 byte-order mark is kept and not taken for an
    /// identifier.
    pub fn translate(&self, data: &[u8]) -> FileResult {
        const BOM: &[u8] = b"\xef\xbb\xbf";
        if !data.starts_with(BOM) {
            return self.translate_plain(data);
        }
        let mut res = self.translate_plain(&data[3..]);
        for f in &mut res.findings {
            f.offset += 3;
        }
        let mut out = Vec::with_capacity(res.data.len() + 3);
        out.extend_from_slice(BOM);
        out.extend_from_slice(&res.data);
        res.data = out;
        for i in &mut res.includes {
            i.out_start += 3;
            i.out_end += 3;
            i.in_offset += 3;
        }
        for s in &mut res.comment_spans {
            s.0 += 3;
            s.1 += 3;
        }
        res
    }

    /// `_translate` + `_finish`.
    fn translate_plain(&self, data: &[u8]) -> FileResult {
        let t = &*self.tables;
        let mut st = FileState {
            tr: self,
            t,
            findings: Vec::new(),
            includes: Vec::new(),
            defines: Vec::new(),
            facts: 0,
            discarded: Vec::new(),
            unresolved: BTreeSet::new(),
        };
        let Ok(mut w) = walk(&t.prefixes, t.launch, t.literals, data, &mut st);
        let result = w.output();
        st.finish(data, result, std::mem::take(&mut w.spans), &w.launches)
    }
}

/// What one file's pass collects besides the output (translate.py `_FileState`).
struct FileState<'t> {
    tr: &'t Translator,
    t: &'t Tables,
    findings: Vec<RawFinding>,
    includes: Vec<Include>,
    defines: Vec<Vec<u8>>,
    facts: u32,
    /// calls that got (void): (start, end) of the CUDA name
    discarded: Vec<(usize, usize)>,
    unresolved: BTreeSet<Vec<u8>>,
}

impl Decider for FileState<'_> {
    type Error = std::convert::Infallible;

    #[inline]
    fn name(&mut self, w: &mut Walk<'_>, s: usize, e: usize) -> Result<(), Self::Error> {
        let data = w.data;
        let name = &data[s..e];
        let t = self.t;
        let act = match t.actions.get(name) {
            Some(a) => a,
            None => {
                if let Some(f) = t.unmapped {
                    if cuda_looking(name) {
                        self.unmapped(w, s, e, f);
                    }
                }
                return Ok(());
            }
        };
        if act.flags & SIMPLE != 0 {
            if let Some(r) = t.actions.replacement(act) {
                w.replace(s, e, r);
            }
        } else if act.flags & NONE == 0 {
            self.name_occurrence(w, s, e, act);
        }
        Ok(())
    }

    fn include(
        &mut self,
        w: &mut Walk<'_>,
        at: usize,
        pstart: usize,
        pend: usize,
        angled: bool,
    ) -> Result<(), Self::Error> {
        self.include_occurrence(w, at, pstart, pend, angled);
        Ok(())
    }

    fn text(&mut self, w: &mut Walk<'_>, start: usize, end: usize) -> Result<(), Self::Error> {
        if let Some(new) = self.retranslated(&w.data[start..end]) {
            w.replace(start, end, &new);
        }
        Ok(())
    }
}

impl FileState<'_> {
    /// A name no table has, with the unmapped finding: `_name_occurrence` of `_decide`'s action.
    #[cold]
    fn unmapped(&mut self, w: &mut Walk<'_>, s: usize, e: usize, f: u32) {
        let data = w.data;
        if is_declaration(data, s, e) {
            self.defines.push(data[s..e].to_vec());
        } else if !is_member(data, s) {
            let spec = &self.t.specs[f as usize];
            self.push_spec(spec, s, &data[s..e]);
        }
    }

    fn push_spec(&mut self, spec: &Spec, offset: usize, name: &[u8]) {
        self.findings.push(spec.finding(offset, name, ""));
    }

    /// `_name_occurrence`: a name that is not a plain rename.
    fn name_occurrence(&mut self, w: &mut Walk<'_>, s: usize, e: usize, act: &Action) {
        let data = w.data;
        let name = &data[s..e];
        let t = self.t;
        if act.flags & DOWNGRADE != 0 {
            let dg = &t.downgrades[name];
            if let Some((text, resume)) = rewrite_call(data, e, dg) {
                let f = self.downgrade_finding(data, s, e, dg, act.flags & MASKED != 0);
                self.findings.push(f);
                w.replace(s, resume, &text);
                w.skip_until = resume;
                return;
            }
        }
        if act.flags & SYNC != 0 {
            self.facts |= facts::USES_SYNC;
            if t.mask64.is_some() && act.flags & MASKED != 0 && self.mask_occurrence(w, s, e, act) {
                return;
            }
        }
        let replacement = t.actions.replacement(act);
        if act.flags & STMT != 0 {
            if let Some(r) = replacement {
                if maybe_statement(data, s) && self.discards(data, s, e) {
                    w.replace_parts(s, e, &[b"(void)", r]);
                    return;
                }
                if act.finding < 0 {
                    w.replace(s, e, r);
                    return;
                }
            }
        }
        if act.flags & NS != 0 && !namespace_context(data, s, e) {
            return;
        }
        if act.finding >= 0 {
            let f = act.finding;
            let spec = &t.specs[f as usize];
            if spec.kind != "unmapped" {
                self.push_spec(spec, s, name);
            } else if is_declaration(data, s, e) {
                self.defines.push(name.to_vec()); // the project's own name (see the tree pass)
            } else if !is_member(data, s) {
                self.push_spec(spec, s, name);
            }
        }
        if let Some(r) = replacement {
            w.replace(s, e, r);
        }
    }

    /// `_discards`
    fn discards(&mut self, data: &[u8], s: usize, e: usize) -> bool {
        if discarded_call(data, s, e) {
            self.discarded.push((s, e));
            return true;
        }
        false
    }

    fn classify(&mut self, data: &[u8], s: usize, mask: &[u8]) -> masks::Mask {
        let m = masks::classify(data, s, mask, &self.tr.known);
        if let Some(u) = &m.unresolved {
            self.unresolved.insert(u.clone());
        }
        m
    }

    /// `_downgrade_finding` (the method and the module function).
    /// (`masked`: the name takes the lane mask first, `name in masks.MASKED`)
    fn downgrade_finding(
        &mut self,
        data: &[u8],
        s: usize,
        e: usize,
        dg: &Downgrade,
        masked: bool,
    ) -> RawFinding {
        let mut mask = None;
        if matches!(dg.action, DgAction::DropFirstArg | DgAction::ReplaceCall) && masked {
            if let Some((a, b)) = masks::first_argument(data, e) {
                mask = Some(self.classify(data, s, &data[a..b]));
            }
        }
        let below = format!("{}.{}", dg.below.0, dg.below.1);
        let cuda = latin1(&dg.cuda_name);
        let replacement = latin1(&dg.replacement);
        let finding =
            |kind: &str, reason: String, suggestion: String, blocking: bool, rule: &str| {
                RawFinding {
                    offset: s,
                    name: dg.cuda_name.clone(),
                    kind: kind.to_string(),
                    reason: from_latin1(&reason).unwrap_or_else(|| reason.into_bytes()),
                    suggestion: from_latin1(&suggestion).unwrap_or_else(|| suggestion.into_bytes()),
                    blocking,
                    rule: rule.to_string(),
                }
            };
        if let Some(m) = &mask {
            if !matches!(
                m.cls,
                Class::Full32 | Class::Full64 | Class::Active | Class::Active32
            ) {
                let what = if m.cls == Class::Partial {
                    "names only some lanes"
                } else {
                    "is not known before run time"
                };
                return finding(
                    "hazard",
                    format!(
                        "HIP < {below} has no {cuda}: rewritten to {replacement} without the lane mask, which \
                         involves every active lane, but the mask {what} ({})",
                        latin1(&m.how)
                    ),
                    format!(
                        "make the mask-less call correct for every active lane, or raise --hip-version to {below} \
                         to keep the mask"
                    ),
                    true,
                    "lane-mask-32",
                );
            }
        }
        finding(
            "hazard",
            format!(
                "HIP < {below} has no {cuda}: rewritten to {replacement}{}",
                if mask.is_some() { " without the lane mask" } else { "" }
            ),
            format!(
                "correct only when every lane of the mask is active; raise --hip-version to {below} to keep the \
                 mask"
            ),
            false,
            "sync-mask-dropped",
        )
    }

    /// `_mask_occurrence`: a `*_sync` call for a target with 64-bit masks. Whether it edited.
    fn mask_occurrence(&mut self, w: &mut Walk<'_>, s: usize, e: usize, act: &Action) -> bool {
        let data = w.data;
        let Some((a, b)) = masks::first_argument(data, e) else {
            return false;
        };
        let arg = &data[a..b];
        let name = &data[s..e];
        let m = self.classify(data, s, arg);
        let target = format!("HIP {}", latin1(&self.t.target_label));
        let push = |st: &mut Self,
                    kind: &str,
                    reason: String,
                    suggestion: &str,
                    blocking: bool,
                    rule: &str| {
            st.findings.push(RawFinding {
                offset: s,
                name: name.to_vec(),
                kind: kind.to_string(),
                reason: from_latin1(&reason).unwrap_or_else(|| reason.into_bytes()),
                suggestion: suggestion.as_bytes().to_vec(),
                blocking,
                rule: rule.to_string(),
            });
        };
        if m.cls == Class::Full32 || m.cls == Class::Active32 {
            let named = masks::is_name(arg);
            let new = if m.cls == Class::Full32 && named {
                format!("({} | {})", latin1(arg), masks::UPPER_LANES)
            } else if m.cls == Class::Full32 {
                self.t.mask64.as_deref().map(latin1).unwrap_or_default()
            } else if named {
                format!("((void){}, __activemask())", latin1(arg))
            } else {
                "__activemask()".to_string()
            };
            let why = if m.cls == Class::Full32 {
                "names the whole 32-lane warp"
            } else {
                "holds __activemask() in 32 bits (the lanes of the call, at the call)"
            };
            push(
                self,
                "note",
                format!(
                    "lane mask {} {why}: {target} takes 64-bit masks (lanes 32-63 of a CDNA wavefront) and checks \
                     that they name exactly the calling lanes, so it becomes {new}",
                    latin1(&m.how)
                ),
                "the code's other 32-lane assumptions are reported by the lint (warp-size-literal, lane-math, \
                 ballot-32, ...)",
                false,
                "sync-mask-widened",
            );
            let head: &[u8] = self.t.actions.replacement(act).unwrap_or(name);
            let new = from_latin1(&new).unwrap_or_else(|| new.into_bytes());
            w.replace_parts(s, b, &[head, &data[e..a], &new]);
            w.skip_until = b;
            return true;
        }
        if m.cls == Class::Partial || m.cls == Class::Runtime {
            let what = if m.cls == Class::Partial {
                "names only some lanes of the 32-lane warp"
            } else {
                "is not a constant the translation can follow"
            };
            push(
                self,
                "hazard",
                format!(
                    "lane mask {}: it {what}; {target} takes a 64-bit mask that names exactly the calling lanes of \
                     a wavefront (64 lanes on CDNA), so a 32-bit mask does not compile (static_assert) and leaves \
                     lanes 32-63 out; which of them should join cannot be decided by a rule",
                    latin1(&m.how)
                ),
                "compute the mask as a 64-bit value for the wavefront (unsigned long long from __activemask() or \
                 __ballot_sync), or pass __activemask() when every calling lane takes part",
                true,
                "lane-mask-32",
            );
        }
        false
    }

    /// `_include_occurrence`
    fn include_occurrence(
        &mut self,
        w: &mut Walk<'_>,
        at: usize,
        pstart: usize,
        pend: usize,
        angled: bool,
    ) {
        let data = w.data;
        let t = self.t;
        let path = &data[pstart..pend];
        let (repl, finding): (Option<&[u8]>, Option<u32>) = match t.headers.get(path) {
            Some((r, f)) => (r.as_deref(), *f),
            None if cuda_only_header(path) => (None, t.cuda_only_header),
            None => (None, None),
        };
        let included = repl.unwrap_or(path);
        if self.facts & facts::SEEN_INCLUDE == 0 {
            self.facts |= facts::SEEN_INCLUDE;
            if included == insert::RUNTIME_HEADER {
                self.facts |= facts::RUNTIME_FIRST;
            }
        }
        if included == insert::RUNTIME_HEADER {
            self.facts |= facts::HAS_RUNTIME;
        } else if included == insert::RUNTIME_API_HEADER {
            self.facts |= facts::HAS_RUNTIME_API;
        }
        if let Some(f) = finding {
            let spec = &t.specs[f as usize];
            let rule = if spec.kind == "hazard" {
                "cuda-only-header"
            } else {
                ""
            };
            self.findings.push(spec.finding(pstart, path, rule));
        }
        let out_pstart = w.out_offset(pstart);
        match repl {
            None => self.includes.push(Include {
                out_start: out_pstart,
                out_end: out_pstart + (pend - pstart),
                spelling: path.to_vec(),
                angled,
                in_offset: pstart,
                mapped: false,
            }),
            Some(r) if !r.is_empty() => {
                // a header of the project's own with this name wins: the tree pass puts its path back
                self.includes.push(Include {
                    out_start: out_pstart,
                    out_end: out_pstart + r.len(),
                    spelling: path.to_vec(),
                    angled,
                    in_offset: pstart,
                    mapped: true,
                });
                w.replace(pstart, pend, r);
            }
            Some(_) => {
                // HIP needs no such header: comment the directive out
                let ls = line_start(data, at);
                let dend = pend + 1; // the closing > or "
                let directive = lstrip_blanks(&data[ls..dend]);
                w.replace_parts(ls, dend, &[b"// [hipify] not needed with HIP: ", directive]);
            }
        }
    }

    /// `_retranslated`: a comment or literal with its names translated, or None when nothing changes.
    fn retranslated(&self, text: &[u8]) -> Option<Vec<u8>> {
        let t = self.t;
        let n = text.len();
        let mut out: Vec<u8> = Vec::new();
        let mut pos = 0;
        let mut i = 0;
        while i < n {
            if !crate::scan::IDC[text[i] as usize] {
                i += 1;
                continue;
            }
            let s = i;
            while i < n && crate::scan::IDC[text[i] as usize] {
                i += 1;
            }
            let c = text[s];
            if !(c.is_ascii_alphabetic() || c == b'_') {
                continue; // `(?<![IDC])[A-Za-z_]`: a run from a digit or a high byte has no match
            }
            if let Some(act) = t.actions.get(&text[s..i]) {
                if let (Some(r), false) = (t.actions.replacement(act), act.flags & NS != 0) {
                    out.extend_from_slice(&text[pos..s]);
                    out.extend_from_slice(r);
                    pos = i;
                }
            }
        }
        if pos == 0 {
            return None;
        }
        out.extend_from_slice(&text[pos..]);
        (out != text).then_some(out)
    }

    /// `_finish`
    fn finish(
        mut self,
        data: &[u8],
        result: Option<Vec<u8>>,
        spans: Vec<(usize, usize)>,
        launches: &[(usize, usize)],
    ) -> FileResult {
        let t = self.t;
        if t.report_unmapped {
            define_names(data, &mut self.defines);
        }
        let mut changed = result.is_some();
        let mut out = result.unwrap_or_else(|| data.to_vec());
        if !launches.is_empty() {
            let (converted, failed) = convert_launches(&out, launches, &mut self.includes);
            for &in_off in &failed {
                self.findings.push(RawFinding {
                    offset: in_off,
                    name: b"<<<".to_vec(),
                    kind: "hazard".to_string(),
                    reason: b"kernel launch not converted: could not parse it".to_vec(),
                    suggestion: b"convert it to hipLaunchKernelGGL by hand (or keep <<<>>>: HIP-Clang accepts it)"
                        .to_vec(),
                    blocking: false,
                    rule: "launch-syntax".to_string(),
                });
            }
            changed = changed || failed.len() < launches.len();
            if let Some(c) = converted {
                out = c;
            }
        }
        if !self.discarded.is_empty() {
            let note = self.discarded_note(data);
            self.findings.push(note);
        }
        let facts = self.facts | insert::defines_and_lines(data, t.sync_define.as_deref());
        FileResult {
            data: out,
            changed,
            findings: self.findings,
            includes: self.includes,
            defines: self.defines,
            comment_spans: spans,
            facts,
            unresolved: self.unresolved.into_iter().collect(),
        }
    }

    /// `_discarded_note`: one note for every call of the file whose hipError_t result got (void).
    fn discarded_note(&self, data: &[u8]) -> RawFinding {
        let t = self.t;
        let calls = &self.discarded;
        let offsets: Vec<usize> = calls.iter().map(|c| c.0).collect();
        let pos = super::rules::positions(data, &offsets);
        let names: BTreeSet<&[u8]> = calls.iter().map(|&(s, e)| &data[s..e]).collect();
        let names: Vec<String> = names.into_iter().map(latin1).collect();
        let mut lines = calls
            .iter()
            .take(20)
            .map(|c| pos[&c.0].0.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if calls.len() > 20 {
            lines.push_str(", ...");
        }
        let mut shown = names.iter().take(6).cloned().collect::<Vec<_>>().join(", ");
        if names.len() > 6 {
            shown.push_str(", ...");
        }
        let n = calls.len();
        let plural = if n > 1 { "s" } else { "" };
        let nodiscard = latin1(&t.nodiscard);
        let target = latin1(&t.target_label);
        let reason = format!(
            "{n} call{plural} whose {nodiscard} result the CUDA code discards ({shown}; line{plural} {lines}) got \
             (void): {nodiscard} is [[nodiscard]] in HIP {target} (C++17), so an unchecked call warns (an error \
             under -Werror)"
        );
        RawFinding {
            offset: calls[0].0,
            name: data[calls[0].0..calls[0].1].to_vec(),
            kind: "note".to_string(),
            reason: from_latin1(&reason).unwrap_or_else(|| reason.into_bytes()),
            suggestion: b"check the errors instead of discarding them".to_vec(),
            blocking: false,
            rule: "nodiscard-void".to_string(),
        }
    }
}
