"""One port run: stage, hipify + lint, compile both sides, map compiler messages back, diff.

``run_port(request)`` does the work and returns a ``PortResult``; it prints nothing (the terminal view is
tools/port/render.py, the report file tools/port/report.py), so ``port`` and ``check`` share it.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tools.errors import ToolError
from tools.hipify import Finding, HipifyOptions, HipifyResult, hipify_tree, included_closure, output_relpath
from tools.port.classify import CLASSES, Cause, Classifier, Project
from tools.port.linemap import LineMap
from tools.port.sources import COMPILE_SUFFIXES, Staged, resolve_includes, stage
from tools.port.toolkits import (
    SIDE_LABEL,
    SIDES,
    Side,
    compile_command,
    compile_env,
    deps_command,
    read_depfile,
)

#: progress(done, total, what): called as the run advances (the terminal view draws it)
Progress = Callable[[int, int, str], None]
COMPILE_TIMEOUT_S = 600

_CLANG_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$",
    re.M,
)
_NVCC_DIAG = re.compile(
    r"^(?P<file>[^\s(][^(\n]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning)(?: #[\w-]+)?: (?P<msg>.*)$",
    re.M,
)


def shown(path: Path | str) -> str:
    """A path as the user would type it: relative to the current directory when under it."""
    p = Path(path)
    try:
        return p.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(p)


@dataclass(frozen=True)
class Diagnostic:
    """A compiler message, its position mapped back to the CUDA source (``line`` 0: no position)."""

    severity: str  # "error" | "warning" | "fatal error" | ...
    message: str
    file: str  # as shown to the user ("" when the compiler named no file)
    line: int
    column: int
    source_text: str  # the CUDA source line at ``line`` ("" when unknown)

    @property
    def is_error(self) -> bool:
        return "error" in self.severity

    def location(self) -> str:
        if not self.file:
            return ""
        col = f":{self.column}" if self.column else ""
        return f"{self.file}:{self.line}{col}" if self.line else self.file


@dataclass
class UnitResult:
    """One translation unit compiled on one side."""

    source: Path  # the CUDA source
    compiled: Path  # what the compiler read (the source, or its hipified output)
    command: list[str]
    returncode: int
    output: str  # the compiler's messages, hipified paths and lines mapped back to the CUDA source
    diagnostics: list[Diagnostic]
    seconds: float
    raw_output: str = ""  # the messages as the compiler printed them (paths of the files it read)
    cause: Cause | None = None  # why it failed (ROCm side; tools/port/classify.py)
    reads: list[Path] | None = None  # the project files the compile read (CUDA sources); None: not known

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


@dataclass
class SideResult:
    side: Side
    units: list[UnitResult] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.side.label

    @property
    def status(self) -> str:
        """``ok``, ``failed``, ``skipped`` (no toolkit), or ``empty`` (nothing to compile)."""
        if self.side.toolchain is None:
            return "skipped"
        if not self.units:
            return "empty"
        return "ok" if all(u.ok for u in self.units) else "failed"

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for u in self.units for d in u.errors]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for u in self.units for d in u.diagnostics if not d.is_error]


@dataclass(frozen=True)
class FileDiff:
    source: Path
    output: Path
    text: str  # unified diff ("" when the file is unchanged)


@dataclass(frozen=True)
class PortRequest:
    files: Sequence[Path]  # the sources to port (all of csrc/ for `check`)
    include_dirs: Sequence[Path]  # -I directories, in order: the user's (-I DIR), then the project's csrc/
    sides: Sequence[Side]
    hip_version: tuple[int, int] | None = None  # None: the ROCm side's version, else what hipify detects
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    work_dir: Path | None = None  # None: a temporary directory
    jobs: int = 2
    mappings: Path | None = None  # hipify mapping overrides
    # The build's -D/-U, in order ((name, None) for -U): for hipify's scope and for both compiles.
    defines: Sequence[tuple[str, str | None]] = ()


@dataclass
class PortResult:
    request: PortRequest
    sources: list[Path]  # every file covered: the given files and the project headers they include
    units: list[Path]  # the translation units compiled
    hipify: HipifyResult
    findings: list[Finding]  # positions in the CUDA sources
    sides: dict[str, SideResult]
    diffs: list[FileDiff]
    outputs: dict[Path, Path]  # CUDA source -> hipified output
    seconds: float = 0.0
    includes: dict[Path, list[Path]] = field(default_factory=dict)  # CUDA source -> the project files it includes

    @property
    def hip_version(self) -> tuple[int, int] | None:
        return self.hipify.hip_version

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def included(self) -> set[Path]:
        """The files the translation units read: each unit and the project headers it includes, as its compiles
        read them (their dependency files: only the branches the build compiles), else as hipify resolved its
        includes (every #include line, transitively); the given files when none of them is a unit."""
        if not self.units:
            return included_closure(self.includes, [Path(os.path.abspath(f)) for f in self.request.files])
        out: set[Path] = set()
        for unit in self.units:
            reads = [u.reads for side in self.sides.values() for u in side.units if u.source == unit]
            known = [r for r in reads if r is not None]
            if known:
                out.add(unit)
                out.update(f for r in known for f in r)
            else:
                out |= included_closure(self.includes, [unit])
        return out

    def problems(self, strict: bool) -> list[str]:
        """Why the port fails (empty: it passes). Skipped sides count only under ``strict``."""
        out: list[str] = []
        if self.blocking:
            n = len(self.blocking)
            # A version finding's reason names the HIP version that has the API: worth the space.
            what = [f.reason if f.kind == "version" else f"{f.name} [{f.rule or f.kind}]" for f in self.blocking[:5]]
            more = f"; {n - 5} more" if n > 5 else ""
            out.append(
                f"{n} blocking finding{'s' if n != 1 else ''} remain{'s' if n == 1 else ''}: "
                + "; ".join(dict.fromkeys(what))
                + more
            )
        for side in self.sides.values():
            if side.status == "failed":
                first = next(iter(side.errors), None)
                where = f": {first.location()}: {first.message}" if first else ""
                cause = next((u.cause for u in side.units if u.cause is not None), None)
                why = f" [{cause.cls}: {cause.label}]" if cause is not None else ""
                out.append(f"the {side.label} side does not compile{where}{why}")
            elif side.status == "skipped" and strict:
                out.append(f"the {side.label} side was skipped (--strict): {first_sentence(side.side.skipped)}")
        return out


def first_sentence(text: str) -> str:
    m = re.match(r"(.+?[.)])(\s|$)", text, re.S)
    return (m.group(1) if m else text).strip()


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _read_lines(path: Path, cache: dict[Path, list[str]]) -> list[str]:
    if path not in cache:
        try:
            cache[path] = _decode(path.read_bytes()).splitlines()
        except OSError:
            cache[path] = []
    return cache[path]


class OutputMapper:
    """Rewrites compiler output: hipified paths (and their lines/columns) -> CUDA sources."""

    def __init__(self, outputs: Mapping[Path, Path], staged: Staged) -> None:
        self._maps: dict[str, tuple[Path, LineMap]] = {}
        # a file a compile read -> the project's CUDA source it is (a hipified output or an original)
        self._sources = {Path(out): staged.original(src) for src, out in outputs.items()}
        self._sources.update({orig: orig for orig in staged.staged_of})
        for staged_src, out in outputs.items():
            original = staged.original(staged_src)
            try:
                lm = LineMap(staged_src.read_bytes(), out.read_bytes())
            except OSError:
                continue
            self._maps[str(out)] = (original, lm)
        self._lines: dict[Path, list[str]] = {}
        alts = "|".join(re.escape(p) for p in sorted(self._maps, key=len, reverse=True))
        self._pattern = re.compile(rf"(?P<path>{alts})(?::(?P<line>\d+)(?::(?P<col>\d+))?)?") if alts else None

    def source_of(self, path: Path) -> Path | None:
        """The project's CUDA source a file a compiler read is (or was hipified from); None: not a project file."""
        return self._sources.get(path)

    def text(self, output: str) -> str:
        if self._pattern is None:
            return output

        def sub(m: re.Match[str]) -> str:
            original, lm = self._maps[m.group("path")]
            out = shown(original)
            if m.group("line"):
                line = int(m.group("line"))
                out += f":{lm.source_line(line)}"
                if m.group("col"):
                    out += f":{lm.source_column(line, int(m.group('col')))}"
            return out

        return self._pattern.sub(sub, output)

    def diagnostics(self, mapped_output: str, returncode: int) -> list[Diagnostic]:
        found: list[tuple[int, Diagnostic]] = []
        for pattern in (_CLANG_DIAG, _NVCC_DIAG):
            for m in pattern.finditer(mapped_output):
                file = m.group("file").strip()
                line = int(m.group("line"))
                col = int(m.group("col")) if pattern is _CLANG_DIAG and m.group("col") else 0
                lines = _read_lines(Path(file), self._lines)
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                if pattern is _NVCC_DIAG and text:
                    col = _nvcc_column(mapped_output, m.end(), text)
                diag = Diagnostic(m.group("sev"), m.group("msg").strip(), shown(file), line, col, text)
                found.append((m.start(), diag))
        out = [d for _, d in sorted(found, key=lambda x: x[0])]
        if returncode != 0 and not any(d.is_error for d in out):
            tail = [ln.strip() for ln in mapped_output.splitlines() if ln.strip()]
            out.append(Diagnostic("error", tail[-1] if tail else f"exit status {returncode}", "", 0, 0, ""))
        return out


def _nvcc_column(output: str, end: int, text: str) -> int:
    """nvcc prints the source line indented by two spaces and a caret line under it: the column (1-based)."""
    following = output[end:].split("\n", 3)[1:3]
    if len(following) == 2 and following[0] == "  " + text and following[1].strip() == "^":
        return following[1].index("^") - 1
    return 0


def _compile(
    *,
    side: Side,
    source: Path,
    compiled: Path,
    obj: Path,
    include_dirs: Sequence[Path],
    environ: Mapping[str, str],
    tool_tmp: Path,
    mapper: OutputMapper,
    defines: Sequence[tuple[str, str | None]] = (),
) -> UnitResult:
    obj.parent.mkdir(parents=True, exist_ok=True)
    depfile = obj.with_name(obj.name + ".d")
    depfile.unlink(missing_ok=True)
    cmd = compile_command(side, compiled, obj, include_dirs, depfile=depfile, defines=defines)
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            env=compile_env(side, environ, tool_tmp),
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        rc, output = 124, f"{cmd[0]}: timed out after {COMPILE_TIMEOUT_S} s\n"
    except OSError as err:
        rc, output = 127, f"{cmd[0]}: cannot run: {err.strerror or err}\n"
    mapped = mapper.text(output) if side.name == "rocm" else output
    took = time.perf_counter() - started
    read = read_depfile(depfile, Path.cwd())
    if read is None and rc != 0 and side.name == "rocm":  # (nvcc writes it also when the compile fails)
        try:
            subprocess.run(
                deps_command(side, compiled, include_dirs, depfile, defines),
                capture_output=True,
                env=compile_env(side, environ, tool_tmp),
                timeout=COMPILE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            pass  # (then the includes hipify resolved count)
        read = read_depfile(depfile, Path.cwd())
    # (the ROCm side reads the hipified files: the CUDA sources they came from; only the project's files count)
    reads = None if read is None else [f for f in (mapper.source_of(r) for r in read) if f is not None]
    return UnitResult(
        source, compiled, cmd, rc, mapped, mapper.diagnostics(mapped, rc), took, raw_output=output, reads=reads
    )


def explain_failures(
    side: SideResult, hipified: HipifyResult, staged: Staged, request: PortRequest, findings: Sequence[Finding]
) -> list[Finding]:
    """Classify every failed unit of the ROCm side (``UnitResult.cause``) and return one blocking finding per
    unit naming the cause (tools/port/classify.py), positioned on the unit (at the error when it is there)."""
    from tools.hipify.mapping import load_database  # noqa: PLC0415 - only when a compile failed

    tc = side.side.toolchain
    origin = {out: staged.original(src) for src, out in hipified.outputs.items()}
    hip_include = tc.root / "include" / "hip" if tc is not None and tc.root is not None else None
    cuda_home = request.environ.get("CUDA_HOME") or request.environ.get("CUDA_PATH") or ""
    cuda_include = Path(cuda_home) / "include" if cuda_home else None
    classifier = Classifier(
        db=load_database(request.mappings),
        hip_version=hipified.hip_version,
        hip_include=hip_include,
        project=Project(hipified.outputs.values(), origin=origin),
        findings=findings,
        arch=", ".join(tc.archs) if tc is not None else "",
        cuda_include=cuda_include,
    )
    out: list[Finding] = []
    for unit in side.units:
        if unit.ok:
            continue
        cause = classifier.classify(unit.source, unit.compiled, unit.raw_output, unit.command)
        unit.cause = cause
        in_unit = cause.file and Path(os.path.abspath(cause.file)) == unit.source
        reported = f" (hipify reported it at {cause.reported})" if cause.reported else ""
        out.append(
            Finding(
                unit.source,
                cause.line if in_unit else 0,
                cause.column if in_unit else 0,
                cause.subject or unit.source.name,
                kind="compile",
                reason=f"does not compile for ROCm: {CLASSES[cause.cls].split(' (')[0]}: {cause.reason}{reported}"
                + ("" if in_unit or not cause.file else f" [at {cause.location()}]"),
                suggestion=cause.suggestion,
                blocking=True,
                rule=cause.cls,
            )
        )
    return out


def _diff(original: Path, staged_src: Path, output: Path, out_root: Path) -> FileDiff:
    try:
        a, b = staged_src.read_bytes(), output.read_bytes()
    except OSError:
        return FileDiff(original, output, "")
    if a == b:
        return FileDiff(original, output, "")
    lines = difflib.unified_diff(
        _decode(a).splitlines(keepends=True),
        _decode(b).splitlines(keepends=True),
        fromfile=shown(original) if Path(shown(original)).is_absolute() else f"a/{shown(original)}",
        tofile=f"b/{output.relative_to(out_root).as_posix()}",
    )
    text = "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines)
    return FileDiff(original, output, text)


def hipified_dir(directory: Path, staged: Staged, out_root: Path) -> Path | None:
    """Where hipify's tree pass put ``directory`` (an original directory) under ``out_root``: every source root is
    mirrored into it, directories renamed by hipify's naming rules (output_relpath)."""
    place = staged.within_root(directory)
    if place is None:
        return None
    _root, rel = place
    if rel == PurePosixPath("."):
        return out_root
    return out_root / output_relpath(rel / "x", changed=False).parent


def run_port(request: PortRequest, progress: Progress | None = None) -> PortResult:
    """Port ``request.files``: see the module docstring. Raises ToolError for a user's mistake."""
    started = time.perf_counter()
    if not request.files:
        raise ToolError("nothing to port: give at least one CUDA source file")
    tick: Progress = progress or (lambda _d, _t, _w: None)
    with tempfile.TemporaryDirectory(prefix="monarch-port-") as tmp:
        work = request.work_dir if request.work_dir is not None else Path(tmp)
        # The compilers' TMPDIR: HIP-Clang 15 leaves empty directories in it for every compile.
        tool_tmp = Path(tmp) / "tmp"
        tool_tmp.mkdir()
        return _run(request, work, tool_tmp, tick, started)


def _run(request: PortRequest, work: Path, tool_tmp: Path, tick: Progress, started: float) -> PortResult:
    include_dirs = [Path(os.path.abspath(d)) for d in request.include_dirs]
    given = list(dict.fromkeys(Path(os.path.abspath(f)) for f in request.files))
    for f in given:
        if not f.is_file():
            raise ToolError(f"source not found: {f}" if not f.exists() else f"not a file: {f}")
    work = Path(os.path.abspath(work))
    for place in [*given, *include_dirs]:
        if work == place or work in place.parents or place in work.parents:
            raise ToolError(f"work directory {work} overlaps the sources ({place}): choose another -o directory")
    files = resolve_includes(given, include_dirs)
    units = [f for f in given if f.suffix in COMPILE_SUFFIXES]
    sides = {s.name: s for s in request.sides}
    active = [s for s in (sides.get(n) for n in SIDES) if s is not None and s.toolchain is not None]
    total = 1 + len(units) * len(active)
    done = 0
    tick(done, total, f"hipify {len(files)} file{'s' if len(files) != 1 else ''}")

    staged = stage(files, include_dirs, work / "stage")
    rocm = sides.get("rocm")
    version = request.hip_version
    if version is None and rocm is not None and rocm.toolchain is not None:
        version = rocm.toolchain.version
    out_root = work / "hip"
    result = hipify_tree(
        staged.roots,
        out_root,
        # the files port compiles are compiled as HIP: its units count as CUDA units (tools/hipify/scope.py)
        HipifyOptions(
            hip_version=version,
            mapping_overrides=request.mappings,
            jobs=1,
            cuda_units=COMPILE_SUFFIXES,
            defines=request.defines,
        ),
    )
    done += 1
    findings = [
        Finding(
            staged.original(f.file),
            f.line,
            f.column,
            f.name,
            kind=f.kind,
            reason=f.reason,
            suggestion=f.suggestion,
            blocking=f.blocking,
            rule=f.rule,
        )
        for f in result.findings
    ]
    findings.sort(key=Finding.sort_key)  # by the CUDA file's path, then position
    outputs = {staged.original(s): o for s, o in result.outputs.items()}
    diffs = [_diff(staged.original(s), s, o, out_root) for s, o in sorted(result.outputs.items())]
    mapper = OutputMapper(result.outputs, staged)
    # The -I directories as the ROCm side sees them: where hipify put each (a directory's name changes as its
    # files' do: cuda -> hip); one no staged file came from has no translation, and none is needed.
    hipified_dirs = [d for d in dict.fromkeys(hipified_dir(d, staged, out_root) for d in include_dirs) if d is not None]

    jobs: list[tuple[Side, Path, Path, Path, list[Path]]] = []
    for side in active:
        for index, unit in enumerate(units):
            obj = work / "obj" / side.name / f"{index}-{unit.name}.o"  # two units may share a name
            if side.name == "cuda":
                jobs.append((side, unit, unit, obj, [unit.parent, *include_dirs]))
            else:
                out = outputs.get(unit)
                if out is None:  # hipify could not read it: reported as a blocking finding
                    continue
                jobs.append((side, unit, out, obj, [out.parent, *hipified_dirs, out_root]))
    side_results = {name: SideResult(s) for name, s in sides.items()}
    if jobs:
        labels = " and ".join(dict.fromkeys(SIDE_LABEL[j[0].name] for j in jobs))
        tick(done, total, f"compiling {len(units)} unit{'s' if len(units) != 1 else ''} for {labels}")
    with ThreadPoolExecutor(max_workers=max(1, request.jobs)) as pool:
        futures = [
            (
                side,
                pool.submit(
                    _compile,
                    side=side,
                    source=unit,
                    compiled=compiled,
                    obj=obj,
                    include_dirs=incs,
                    environ=request.environ,
                    tool_tmp=tool_tmp,
                    mapper=mapper,
                    defines=request.defines,
                ),
            )
            for side, unit, compiled, obj, incs in jobs
        ]
        for side, fut in futures:
            unit_result = fut.result()
            done += 1
            tick(done, total, f"{SIDE_LABEL[side.name]} {shown(unit_result.source)}")
            side_results[side.name].units.append(unit_result)
    rocm_side = side_results.get("rocm")
    if rocm_side is not None and any(not u.ok for u in rocm_side.units):
        findings += explain_failures(rocm_side, result, staged, request, findings)
        findings.sort(key=Finding.sort_key)
    return PortResult(
        request=request,
        sources=files,
        units=units,
        hipify=result,
        findings=findings,
        sides=side_results,
        diffs=diffs,
        outputs=outputs,
        seconds=time.perf_counter() - started,
        includes={staged.original(k): [staged.original(t) for t in v] for k, v in result.includes.items()},
    )
