//! The native per-file step of the tree pass: tree.py's `_process` (translate, silence, lint, positions,
//! the runtime facts, the insertion point) and `project_masks`, over the per-file modules (translate,
//! rules, insert, masks).

use std::collections::{BTreeSet, HashSet};

use memchr::memmem;

use super::insert;
use super::masks::{header_masks, merge_header_masks, HeaderTable, ProjectMask};
use super::rules::{lint_bytes, positions, silenced, LintPlan};
use super::tree::{Mode, Processed, Step, TreeError};
use super::tree_path::FileRules;
use super::tree_state::{FindingRow, IncludeRow};
use super::types::{facts, latin1, FileResult};

/// The per-file translation (translate.py's `Translator`, one per set of project masks).
pub trait PerFile: Sync + Send + Sized {
    /// `Translator.translate(data)`
    fn translate(&self, data: &[u8]) -> FileResult;
    /// the same translator with the project's constant lane masks `table` (tree.py's key `(*key[:5], table)`)
    fn with_masks(&self, table: &[ProjectMask]) -> Self;
}

impl PerFile for super::translate::Translator {
    fn translate(&self, data: &[u8]) -> FileResult {
        super::translate::Translator::translate(self, data)
    }
    fn with_masks(&self, table: &[ProjectMask]) -> Self {
        super::translate::Translator::with_masks(self, super::masks::known_masks(table))
    }
}

/// tree.py's `_process` and `project_masks`, natively.
pub struct NativeStep<'a, T: PerFile> {
    pub translator: T,
    /// the plan's file tables (which files can need the runtime include)
    pub files: &'a FileRules,
    /// None: a plan for --no-lint
    pub lint: Option<LintPlan>,
    /// fault injection for the tests (`MONARCH_FAULT_HIPIFY_PANIC=NAME`, docs/reliability.md): the pass panics on
    /// the file whose path ends with NAME, as a bug would
    pub panic_at: Option<String>,
}

impl<'a, T: PerFile> NativeStep<'a, T> {
    pub fn new(translator: T, files: &'a FileRules, lint: Option<LintPlan>) -> NativeStep<'a, T> {
        let panic_at = std::env::var("MONARCH_FAULT_HIPIFY_PANIC")
            .ok()
            .filter(|v| !v.is_empty());
        NativeStep {
            translator,
            files,
            lint,
            panic_at,
        }
    }
}

impl<T: PerFile> Step for NativeStep<'_, T> {
    type Masks = T;

    fn process(
        &self,
        path: &str,
        data: &[u8],
        translate: bool,
        masks: Option<&T>,
        lint: bool,
    ) -> Result<Processed, TreeError> {
        if self.panic_at.as_deref().is_some_and(|p| path.ends_with(p)) {
            panic!("MONARCH_FAULT_HIPIFY_PANIC: {path}");
        }
        let mut res = Processed::new(Mode::Translate); // (the tree pass sets `sha`: it hashed the input)
        if !translate || memchr::memchr(0, &data[..data.len().min(8192)]).is_some() {
            res.mode = Mode::Copy;
            res.data = Some(data.to_vec());
            return Ok(res);
        }
        let tr = masks.unwrap_or(&self.translator);
        let fr = tr.translate(data);
        let mut raw = fr.findings;
        if memmem::find(data, b"hipify:").is_some() && raw.iter().any(|f| f.kind == "hazard") {
            raw.retain(|f| f.kind != "hazard" || !silenced(data, f.offset, &f.rule));
        }
        if lint {
            let plan = self
                .lint
                .as_ref()
                .ok_or_else(|| TreeError::Fallback("a plan without the lint's section".into()))?;
            raw.extend(lint_bytes(plan, data, &fr.comment_spans));
        }
        let offsets: Vec<usize> = raw.iter().map(|f| f.offset).collect();
        let pos = positions(data, &offsets);
        res.findings = raw
            .into_iter()
            .map(|f| {
                let (line, col) = pos[&f.offset];
                FindingRow(
                    line as i64,
                    col as i64,
                    latin1(&f.name),
                    f.kind,
                    latin1(&f.reason),
                    latin1(&f.suggestion),
                    f.blocking,
                    f.rule,
                )
            })
            .collect();
        res.changed = fr.changed;
        res.includes = fr
            .includes
            .iter()
            .map(|i| {
                IncludeRow(
                    i.out_start as i64,
                    i.out_end as i64,
                    latin1(&i.spelling),
                    i.angled,
                    i.mapped,
                )
            })
            .collect();
        res.defines = fr.defines.iter().map(|d| latin1(d)).collect();
        let mut f = fr.facts;
        if f & facts::HAS_RUNTIME == 0 && self.files.is_implicit(path) {
            f |= insert::uses(data, &fr.comment_spans); // (only these files can need the runtime include)
        }
        res.facts = i64::from(f);
        res.unresolved = fr.unresolved.iter().map(|n| latin1(n)).collect();
        let out = fr.data;
        let at = insert::insertion_point(&out);
        res.insert_at = at as i64;
        res.insert_line = memchr::memchr_iter(b'\n', &out[..at]).count() as i64 + 1;
        res.data = Some(out);
        Ok(res)
    }

    fn project_masks(
        &self,
        _paths: &[&str],
        headers: &[(&str, &[u8])],
        wanted: &BTreeSet<String>,
    ) -> Result<(T, HashSet<String>), TreeError> {
        let mut want: HashSet<Vec<u8>> = HashSet::with_capacity(wanted.len());
        for w in wanted {
            want.insert(super::types::from_latin1(w).ok_or_else(|| {
                TreeError::Fallback(format!("a lane-mask name beyond Latin-1: {w}"))
            })?);
        }
        let tables: Vec<HeaderTable> = headers
            .iter()
            .map(|(_, d)| header_masks(d, &want))
            .collect();
        let table = merge_header_masks(&tables);
        let names = table.iter().map(|m| latin1(&m.name)).collect();
        Ok((self.translator.with_masks(&table), names))
    }
}
