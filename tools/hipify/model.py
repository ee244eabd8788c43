"""Public value types of the hipify stage: options, findings, result.

Plain classes (no ``dataclasses``/``typing`` import) so that ``import tools.hipify`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

LAUNCH_STYLES = ("keep", "hipLaunchKernelGGL")
NAMING_STYLES = ("hipify_torch", "keep")
ENGINES = ("builtin", "hipify_torch")

#: finding kinds, in report order
KINDS = ("error", "unsupported", "version", "unmapped", "hazard", "deprecated", "note")


class HipifyOptions:
    """How to translate. All arguments are keyword arguments with defaults.

    hip_version: target HIP version ``(major, minor)``; ``None`` means the version of the ROCm found on
        this machine (as the build finds it: ``$ROCM_HOME``, ``$ROCM_PATH``, ``/opt/rocm``, ``/usr``), or no version
        limit when none is found.
    translate_comments_and_strings: also rewrite names inside comments and string literals.
    launch_style: ``"keep"`` leaves ``k<<<g, b>>>(...)`` (HIP-Clang accepts it) or ``"hipLaunchKernelGGL"``.
    mapping_overrides: a TSV/JSON file whose entries add to or override the database.
    jobs: worker processes (``None``: one per CPU, used only when there is enough work; ``1``: serial).
    naming: ``"hipify_torch"`` (``.cu`` -> ``.hip``, changed ``x.h`` -> ``x_hip.h``, ``cuda`` -> ``hip`` in
        directory names) or ``"keep"`` (same relative paths, ``.cu`` -> ``.hip`` only).
    lint: run the portability-hazard lint.
    engine: ``"builtin"`` or ``"hipify_torch"`` (the external engine, when importable).
    void_discarded: write ``(void)`` before calls that discard a ``[[nodiscard]]`` HIP result (``hipError_t``);
        by default they are left as written and reported (a note), so the compiler's warning still shows.
    """

    __slots__ = (
        "engine",
        "hip_version",
        "jobs",
        "launch_style",
        "lint",
        "mapping_overrides",
        "naming",
        "report_unmapped",
        "translate_comments_and_strings",
        "void_discarded",
    )

    def __init__(
        self,
        *,
        hip_version: tuple[int, int] | None = None,
        translate_comments_and_strings: bool = False,
        launch_style: str = "keep",
        mapping_overrides: Path | None = None,
        jobs: int | None = None,
        naming: str = "hipify_torch",
        lint: bool = True,
        engine: str = "builtin",
        report_unmapped: bool = True,
        void_discarded: bool = False,
    ) -> None:
        self.hip_version = hip_version
        self.translate_comments_and_strings = translate_comments_and_strings
        self.launch_style = launch_style
        self.mapping_overrides = mapping_overrides
        self.jobs = jobs
        self.naming = naming
        self.lint = lint
        self.engine = engine
        self.report_unmapped = report_unmapped
        self.void_discarded = void_discarded

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = str(value) if isinstance(value, Path) else value
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"HipifyOptions({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HipifyOptions) and self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]


class Finding:
    """Something left unportable (or worth knowing) at a position of a source file.

    line and column are 1-based; the column counts bytes. ``blocking`` findings make ``--strict`` fail.
    """

    __slots__ = ("blocking", "column", "file", "kind", "line", "name", "reason", "rule", "suggestion")

    def __init__(
        self,
        file: Path,
        line: int,
        column: int,
        name: str,
        *,
        kind: str,
        reason: str,
        suggestion: str,
        blocking: bool,
        rule: str = "",
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.name = name
        self.kind = kind
        self.reason = reason
        self.suggestion = suggestion
        self.blocking = blocking
        self.rule = rule

    def to_json(self) -> dict[str, object]:
        return {
            "file": str(self.file),
            "line": self.line,
            "column": self.column,
            "name": self.name,
            "kind": self.kind,
            "rule": self.rule,
            "reason": self.reason,
            "suggestion": self.suggestion,
            "blocking": self.blocking,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Finding:
        return cls(
            Path(str(data["file"])),
            int(str(data["line"])),
            int(str(data["column"])),
            str(data["name"]),
            kind=str(data["kind"]),
            reason=str(data["reason"]),
            suggestion=str(data["suggestion"]),
            blocking=bool(data["blocking"]),
            rule=str(data.get("rule", "")),
        )

    def sort_key(self) -> tuple[str, int, int, str]:
        return (str(self.file), self.line, self.column, self.name)

    def __repr__(self) -> str:
        return f"Finding({self.file}:{self.line}:{self.column} {self.kind} {self.name!r})"

    def __str__(self) -> str:
        rule = f"[{self.rule}] " if self.rule else ""
        return f"{self.file}:{self.line}:{self.column}: {self.kind}: {rule}{self.name}: {self.reason}"


class HipifyResult:
    """What a run did. ``outputs`` maps every source file to its output file (absolute paths)."""

    __slots__ = (
        "copied",
        "database",
        "engine",
        "findings",
        "hip_version",
        "includes",
        "outputs",
        "removed",
        "seconds",
        "target",
        "unchanged",
        "written",
    )

    def __init__(
        self,
        outputs: Mapping[Path, Path],
        findings: Sequence[Finding],
        *,
        written: Sequence[Path] = (),
        unchanged: Sequence[Path] = (),
        removed: Sequence[Path] = (),
        copied: Sequence[Path] = (),
        hip_version: tuple[int, int] | None = None,
        database: Mapping[str, str] | None = None,
        engine: str = "builtin",
        seconds: float = 0.0,
        target: Mapping[str, object] | None = None,
        includes: Mapping[Path, Sequence[Path]] | None = None,
    ) -> None:
        self.outputs: dict[Path, Path] = dict(outputs)
        self.findings: list[Finding] = sorted(findings, key=Finding.sort_key)
        self.written = list(written)  # outputs (re)written by this run
        self.unchanged = list(unchanged)  # outputs already up to date (not touched)
        self.removed = list(removed)  # stale outputs of deleted sources
        self.copied = list(copied)  # sources copied verbatim (binary or not C/C++/CUDA)
        self.hip_version = hip_version
        self.database = dict(database or {})
        self.engine = engine
        self.seconds = seconds
        self.target = dict(target or {})  # what the target version changes (tools/hipify/targets.py)
        # the project files each source includes, as the tree pass resolved its #include lines (sources only)
        self.includes: dict[Path, list[Path]] = {k: list(v) for k, v in (includes or {}).items()}

    @property
    def blocking(self) -> int:
        """Number of blocking findings: anything unportable that remains (what ``--strict`` fails on)."""
        return sum(1 for f in self.findings if f.blocking)

    def reached(self, starts: Iterable[Path]) -> set[Path]:
        """``starts`` and every project file they include, transitively (the files a translation unit reads)."""
        return included_closure(self.includes, starts)

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in KINDS}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def summary(self) -> str:
        target = ".".join(map(str, self.hip_version)) if self.hip_version else "newest"
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items() if n) or "no findings"
        return (
            f"{len(self.outputs)} files (HIP {target}): {len(self.written)} written, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} stale removed; {counts}; "
            f"{self.blocking} blocking"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "schema": "monarch-runtime/hipify-report/v1",
            "engine": self.engine,
            "hip_version": ".".join(map(str, self.hip_version)) if self.hip_version else None,
            "target": self.target,
            "database": self.database,
            "files": [{"source": str(src), "output": str(dst)} for src, dst in sorted(self.outputs.items())],
            "written": sorted(str(p) for p in self.written),
            "removed": sorted(str(p) for p in self.removed),
            "counts": self.counts(),
            "blocking": self.blocking,
            "findings": [f.to_json() for f in self.findings],
            "includes": {str(k): [str(t) for t in v] for k, v in sorted(self.includes.items())},
            "seconds": round(self.seconds, 4),
        }


def included_closure(includes: Mapping[Path, Sequence[Path]], starts: Iterable[Path]) -> set[Path]:
    """``starts`` and every file reachable from them through ``includes`` (a file -> the files its #include lines
    resolve to: ``HipifyResult.includes``, or the ``includes`` of a hipify report)."""
    seen = set(starts)
    todo = list(seen)
    while todo:
        for target in includes.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen
