"""Port quality: translate public CUDA projects with three engines and count the units that compile for ROCm.

    python bench/port_quality.py CORPUS [CORPUS...] [--hip 6.4,7.2] [--archs gfx942,gfx950] [--hipify-torch DIR]
                                 [--cuda-headers DIR] [--clang-root DIR] [--engines ours,hipify_torch,hipify-clang,hand]
                                 [--work DIR] [-j N] [--json FILE]

Engines: ours (``python -m tools hipify``), hipify_torch (its ``hipify_cli.py --v2``, a checkout given with
``--hipify-torch``), hipify-clang (in a ROCm 7.2 root made with ``ci/rocm-root.sh make 7.2 DIR --with-hipify-clang``,
``--clang-root``, fed CUDA 12.9 headers from PyPI with ``--cuda-headers``; see bench/README.md; ~1 s a file, so it
is skipped, saying so, on a corpus with more than ``--clang-max-files`` files to translate), and ``hand``: a corpus's
own HIP build of its CUDA sources (the maintainers' hand port), where bench/port_corpora.toml describes one.

How each corpus is built comes from bench/port_corpora.toml (which files are units, the include directories, the
defines a CUDA build compiles them with); a corpus without a table there: every ``.cu`` file, include directories
inferred (where a file's ``#include`` that is not beside it is found), no defines. Each engine translates the whole
corpus into its own directory, timed end to end (start-up included); hipify_torch's and hipify-clang's translations
are kept in ``--work`` and reused while the corpus, the options and the tool are the same (ours runs every time, per
HIP version). Then every unit's translation is compiled syntax-only with HIP-Clang in the ROCm root of each
``--hip`` (made with ``--with-libs``: hipCUB/rocThrust/hipBLAS/... where Debian installs them), for the ``--archs``
that root's compiler takes, with the translated include directories and the CUDA build's defines; a compile whose
command and input files (the unit and every project file it includes) are unchanged since a run before is not run
again (``--work``'s compile cache). Every failure is classified by tools/port/classify.py (what ``tools port``/
``tools check`` report). For our engine it also reports:

- the first errors by class, and the ones the classification cannot explain (class ``other``);
- the error sites (every error of every failed unit, at the CUDA source file:line it maps back to, each distinct
  site once) and those without a blocking hipify finding at the site or at the macro/instantiation lines clang
  names with it;
- the blocking findings in files that no CUDA unit includes (goal: 0).

It prints figures; it is not a test. Inside a root it runs itself as a worker (``--compile-worker``,
``--hipify-clang-worker``): those modes need only the standard library and tools/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.hipify import included_closure  # noqa: E402
from tools.hipify.tree import is_system_header  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOOLCHAINS = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains"))
ROOTS = TOOLCHAINS / "roots"
PROFILES = REPO / "bench" / "port_corpora.toml"
ENGINES = ("ours", "hipify_torch", "hipify-clang", "hand")
LABELS = {"ours": "ours", "hipify_torch": "hipify_torch", "hipify-clang": "hipify-clang", "hand": "their hand port"}
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hxx", ".inl", ".cpp", ".cc", ".cxx", ".c")


def _is_cuda_header(spelling: str) -> bool:
    """A header of CUDA's (hipify's table has it as a header, or its CUDA-only header table does)."""
    from tools.hipify.headers import table_row  # noqa: PLC0415
    from tools.hipify.mapping import load_database  # noqa: PLC0415

    entry = load_database().lookup(spelling)
    return (entry is not None and entry.kind == "header") or table_row(spelling) is not None


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\r\n]+)[>"]', re.M)
# what makes a file worth handing to hipify-clang (it parses every file it is given: seconds each)
_CUDA_BEARING = re.compile(
    rb"\b(?:cuda\w*|cu[A-Z]\w*|CU_\w+|CUDA\w*|cublas\w*|curand\w*|cufft\w*|cusparse\w*|cusolver\w*|nccl\w*|"
    rb"__global__|__device__|__shared__|threadIdx|blockIdx|__syncthreads)\b|<<<"
)
# a library header the roots made --with-libs have where Debian installs it (ci/rocm-root.sh)
LIB_MARKER = "usr/include/hipcub/hipcub.hpp"
# clang's messages: file:line:col: severity: text
_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$",
    re.M,
)


# -- corpus ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """How a corpus is built (bench/port_corpora.toml); the default: every .cu unit, inferred include dirs."""

    name: str
    about: str = ""
    units: tuple[str, ...] = ()  # globs relative to the corpus; empty: every .cu file
    include_dirs: tuple[str, ...] | None = None  # relative to the corpus; None: inferred
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE: a CUDA build's, what the translations compile with
    # macros that build leaves undefined and no file of the corpus defines (another vendor's switch): hipify cannot
    # tell them from a -D it was not shown, so they are said with -U
    undefines: tuple[str, ...] = ()
    hand_defines: tuple[str, ...] | None = None  # the corpus's own HIP build, when it has one
    hand_about: str = ""


def load_profiles(path: Path = PROFILES) -> dict[str, Profile]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Profile] = {}
    for name, table in data.items():
        hand = table.get("hand")
        out[name] = Profile(
            name=name,
            about=str(table.get("about", "")),
            units=tuple(table.get("units", ())),
            include_dirs=tuple(table["include_dirs"]) if "include_dirs" in table else None,
            defines=tuple(table.get("defines", ())),
            undefines=tuple(table.get("undefines", ())),
            hand_defines=tuple(hand.get("defines", ())) if hand is not None else None,
            hand_about=str(hand.get("about", "")) if hand is not None else "",
        )
    return out


def corpus_files(corpus: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".")]
    return out


def corpus_units(corpus: Path, files: Sequence[Path], profile: Profile) -> list[Path]:
    """The translation units a build of the corpus compiles: the profile's globs, else every .cu file."""
    if not profile.units:
        return [f for f in files if f.suffix == ".cu"]
    found: dict[Path, None] = {}
    for pattern in profile.units:
        for path in sorted(corpus.glob(pattern)):
            if path.is_file():
                found[path] = None
    return list(found)


def infer_include_dirs(corpus: Path, files: list[Path]) -> list[str]:
    """Directories (relative to the corpus) a build passes with -I: where an include that is not found beside its
    includer is found by the unique file whose path ends in the spelling (most used first)."""
    by_name: dict[str, list[Path]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    used: Counter[str] = Counter()
    for f in files:
        if f.suffix not in SOURCE_SUFFIXES:
            continue
        try:
            data = f.read_bytes()
        except OSError:
            continue
        for m in _INCLUDE.finditer(data):
            spelling = m.group(1).decode("latin-1")
            parts = spelling.split("/")
            if ".." in parts or (f.parent / spelling).is_file() or is_system_header(spelling):
                continue
            hits = [c for c in by_name.get(parts[-1], ()) if c.as_posix().endswith("/" + spelling)]
            if len(hits) == 1:
                base = hits[0].as_posix()[: -len(spelling) - 1]
                used[os.path.relpath(base, corpus)] += 1
    return [d for d, _n in used.most_common()]


def non_utf8(files: list[Path]) -> list[Path]:
    bad = []
    for f in files:
        if f.suffix not in SOURCE_SUFFIXES:
            continue
        try:
            f.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            bad.append(f)
    return bad


def cuda_bearing(files: list[Path]) -> list[Path]:
    """The files hipify-clang is given (it parses each one: seconds a file): sources that mention CUDA."""
    return [f for f in files if f.suffix in SOURCE_SUFFIXES and _CUDA_BEARING.search(f.read_bytes())]


def fingerprint(files: Sequence[Path], extra: object) -> str:
    """What a cached translation depends on: every file's path, size and mtime, and ``extra`` (options, tool)."""
    h = hashlib.sha256(json.dumps(extra, sort_keys=True, default=str).encode())
    for f in files:
        st = f.stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


# -- analysis (pure: unit-tested in tests/bench/test_port_quality.py) ------------------------------------------------
Location = tuple[str, int]  # (file, line)


@dataclass
class Diagnostic:
    severity: str  # "error" | "fatal error" | "warning"
    file: str
    line: int
    message: str
    notes: list[Location] = field(default_factory=list)  # where clang's notes under it point


def parse_diagnostics(output: str) -> list[Diagnostic]:
    """clang's errors and warnings with the locations of the notes that follow each (expanded from macro, in
    instantiation of, candidate ...), in order."""
    out: list[Diagnostic] = []
    for m in _DIAG.finditer(output):
        sev, file, line = m.group("sev"), m.group("file"), int(m.group("line"))
        if sev == "note":
            if out:
                out[-1].notes.append((file, line))
            continue
        out.append(Diagnostic(sev, file, line, m.group("msg").strip()))
    return out


def error_sites(output: str, to_source: Callable[[str, int], Location | None]) -> list[tuple[list[Location], str]]:
    """The error sites of a compile: for each error, the CUDA source locations (``to_source`` maps a compiled
    file's line back; None: not a project file, e.g. HIP's headers) of the error and of its notes, the site itself
    first (the first location that maps), with the error's message. An error with no project location at all is
    left out."""
    sites: list[tuple[list[Location], str]] = []
    for d in parse_diagnostics(output):
        if "error" not in d.severity:
            continue
        mapped = [to_source(f, n) for f, n in [(d.file, d.line), *d.notes]]
        locations = list(dict.fromkeys(loc for loc in mapped if loc is not None))
        if locations:
            sites.append((locations, d.message))
    return sites


def distinct_sites(per_unit: Iterable[Iterable[Sequence[object]]]) -> dict[Location, tuple[set[Location], str]]:
    """Every site once (by its first location), with all the locations seen for it over the units and the first
    message seen there (``per_unit``: each unit's error_sites, also as read back from JSON)."""
    out: dict[Location, tuple[set[Location], str]] = {}
    for sites in per_unit:
        for site in sites:
            at, message = site
            locations = [(str(f), int(n)) for f, n in at]
            seen = out.setdefault(locations[0], (set(), str(message)))
            seen[0].update(locations)
    return out


def unflagged_sites(sites: Mapping[Location, tuple[set[Location], str]], blocking: set[Location]) -> list[Location]:
    """The sites with no blocking finding at any of their locations (``blocking``: (file, line) of each)."""
    return sorted(site for site, (locations, _message) in sites.items() if not locations & blocking)


def blocking_outside_units(
    findings: Iterable[Mapping[str, object]],
    includes: Mapping[str, Sequence[str]],
    units: Iterable[str],
    reads: Mapping[str, Sequence[str] | None] | None = None,
) -> list[Mapping[str, object]]:
    """The blocking findings in files that no unit includes: a unit reaches what its compile read (``reads``: the
    CUDA sources of the files its dependency file lists), else what its #include lines reach transitively
    (``includes``: a hipify report's, every line)."""
    graph = {Path(k): [Path(t) for t in v] for k, v in includes.items()}
    reached: set[Path] = set()
    for unit in units:
        read = (reads or {}).get(unit)
        if read is not None:
            reached |= {Path(unit), *map(Path, read)}
        else:
            reached |= included_closure(graph, [Path(unit)])
    return [f for f in findings if f.get("blocking") and Path(str(f["file"])) not in reached]


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
_HOST_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".c++"})


def cuda_host_code(
    files: Iterable[str], includes: Mapping[str, Sequence[str]], is_cuda_header: Callable[[str], bool]
) -> set[str]:
    """The ``files`` that are CUDA host code: a C/C++ source (compiled by the host compiler in a CUDA build, not one
    of its .cu units) that includes a CUDA header (``is_cuda_header`` of the spelling), itself or through the project
    headers it includes (``includes``: a hipify report's graph), and those headers. Their CUDA names need porting
    as much as a unit's: the bench counts their blocking findings apart from those in files no build compiles."""
    graph = {Path(k): [Path(t) for t in v] for k, v in includes.items()}
    cuda_cache: dict[Path, bool] = {}

    def includes_cuda(path: Path) -> bool:
        hit = cuda_cache.get(path)
        if hit is None:
            try:
                text = path.read_bytes()
            except OSError:
                text = b""
            hit = cuda_cache[path] = any(is_cuda_header(m.group(1).decode("latin-1")) for m in _INCLUDE.finditer(text))
        return hit

    wanted = {Path(f) for f in files}
    out: set[str] = set()
    for unit in [k for k in graph if k.suffix.lower() in _HOST_SUFFIXES] + [
        f for f in wanted if f.suffix.lower() in _HOST_SUFFIXES and f not in graph
    ]:
        reach = included_closure(graph, [unit])
        if any(includes_cuda(f) for f in reach):
            out |= {str(f) for f in reach & wanted}
    return out


# -- engines ---------------------------------------------------------------------------------------------------
def run_ours(
    corpus: Path, out: Path, hip: str, defines: Sequence[str] = (), undefines: Sequence[str] = ()
) -> tuple[float, dict[str, str], dict[str, object]]:
    """``python -m tools hipify`` over ``corpus``, told the build's ``defines`` (NAME or NAME=VALUE) as the compile
    gets them: findings in the branches they decide against are not reported (tools/hipify/scope.py)."""
    report = out.parent / f"{out.name}.report.json"
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "tools", "hipify", str(corpus), "-o", str(out), "--hip-version", hip]
    cmd += [f"-D{d}" for d in defines] + [f"-U{u}" for u in undefines]
    cmd += ["--report", str(report), "-q"]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - t
    data = json.loads(report.read_text())
    mapping = {str(f["source"]): str(f["output"]) for f in data["files"]}
    return took, mapping, data


def hipify_torch_command(
    corpus: Path,
    out: Path,
    checkout: Path,
    include_dirs: list[str],
    ignores: list[Path],
    base_env: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """hipify_torch's command line (``hipify_cli.py --v2``) for the whole ``corpus`` into ``out``, and its
    environment; to be run in ``out``'s parent directory."""
    cmd = [sys.executable, str(checkout / "hipify_cli.py"), "--project-directory", str(corpus)]
    cmd += ["--output-directory", str(out), "--v2"]
    # relative: it joins them to the output directory (an absolute one makes it write outside it)
    cmd += ["--header-include-dirs", "[" + ";".join(include_dirs) + "]"]
    if ignores:  # it stops on the first file that is not UTF-8: they are left out (it copies them as they are)
        cmd += ["--ignores", "[" + ";".join(str(p) for p in ignores) + "]"]
    return cmd, {**(os.environ if base_env is None else base_env), "PYTHONPATH": str(checkout)}


def run_hipify_torch(
    corpus: Path,
    out: Path,
    checkout: Path,
    include_dirs: list[str],
    ignores: list[Path],
    base_env: dict[str, str] | None = None,
) -> tuple[float, dict[str, str]]:
    dump = out.parent / f"{out.name}.dump.json"
    cmd, env = hipify_torch_command(corpus, out, checkout, include_dirs, ignores, base_env)
    cmd += ["--dump-dict-file", str(dump)]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=out.parent, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - t
    mapping: dict[str, str] = {}
    for key, value in json.loads(dump.read_text()).items():
        rel = os.path.relpath(key, out) if key.startswith(str(out)) else os.path.relpath(key, corpus)
        hipified = value.get("hipified_path") if isinstance(value, dict) else None
        mapping[str(corpus / rel)] = str(hipified or Path(out) / rel)
    return took, mapping


def run_hipify_clang(
    corpus: Path,
    out: Path,
    files: list[Path],
    bearing: list[Path],
    include_dirs: list[str],
    defines: Sequence[str],
    cuda_headers: Path,
    root72: Path,
    jobs: int,
) -> tuple[float, dict[str, str], dict[str, str]]:
    """hipify-clang on every CUDA-bearing file, one call per file (faster than one call for many), in the 7.2 root.
    Returns (seconds, source -> output, source -> why it failed)."""
    spec = {
        "files": [str(f) for f in bearing],
        "corpus": str(corpus),
        "out": str(out),
        "includes": [str(corpus / d) for d in include_dirs],
        "defines": list(defines),
        "cuda_path": str(cuda_headers.parent) if cuda_headers.name == "include" else str(cuda_headers),
        "jobs": jobs,
    }
    spec_file = out.parent / f"{out.name}.spec.json"
    result_file = out.parent / f"{out.name}.result.json"
    spec_file.write_text(json.dumps(spec))
    binds = [corpus, out.parent, REPO, cuda_headers.parent if cuda_headers.name == "include" else cuda_headers]
    in_root(
        root72,
        binds,
        ["python3", str(REPO / "bench" / "port_quality.py"), "--hipify-clang-worker", str(spec_file), str(result_file)],
    )
    result = json.loads(result_file.read_text())
    mapping = {str(f): str(out / os.path.relpath(f, corpus)) for f in files}
    failed: dict[str, str] = dict(result["failed"])
    for f in files:  # what hipify-clang did not write (not CUDA-bearing, or it failed): the file as it is
        dst = Path(mapping[str(f)])
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst)
    return float(result["seconds"]), mapping, failed


def in_root(root: Path, binds: list[Path], argv: list[str]) -> None:
    from ci.roots import run_argv  # noqa: PLC0415 - (drops a bind inside another)

    proc = subprocess.run(run_argv(root, argv, binds=binds), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(
            f"port_quality: in the root {root}, {' '.join(argv[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )


# -- workers (inside a root) ---------------------------------------------------------------------------------
def hipify_clang_worker(spec_file: Path, result_file: Path) -> int:
    spec = json.loads(spec_file.read_text())
    corpus, out = Path(spec["corpus"]), Path(spec["out"])
    extra = [f"-I{d}" for d in spec["includes"]] + [f"-D{d}" for d in spec.get("defines", ())]

    def one(src: str) -> tuple[str, str]:
        dst = out / os.path.relpath(src, corpus)
        dst.parent.mkdir(parents=True, exist_ok=True)
        base = ["hipify-clang", src, f"--cuda-path={spec['cuda_path']}", "--cuda-gpu-arch=sm_80", "-o", str(dst)]
        base += extra
        why = ""
        for retry in ([], ["--default-preprocessor"]):  # a maintainer's second try: only the active branches
            proc = subprocess.run([*base, *retry], capture_output=True, text=True, check=False, timeout=600)
            if proc.returncode == 0 and dst.exists():
                return src, ""
            dst.unlink(missing_ok=True)
            why = "aborted (exit 134)" if proc.returncode in (134, -6) else f"exit {proc.returncode}"
        return src, why

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, int(spec["jobs"]))) as pool:
        results = list(pool.map(one, spec["files"]))
    took = time.perf_counter() - t
    result_file.write_text(json.dumps({"seconds": took, "failed": {s: w for s, w in results if w}}))
    return 0


class SourceMap:
    """A compiled file's line -> the CUDA source's (file, line), through the engine's output -> source map."""

    def __init__(self, origin: Mapping[Path, Path]) -> None:
        from tools.port.linemap import LineMap  # noqa: PLC0415

        self._origin = dict(origin)
        self._maps: dict[Path, LineMap | None] = {}
        self._linemap = LineMap

    def __call__(self, file: str, line: int) -> Location | None:
        path = Path(os.path.normpath(file))
        source = self._origin.get(path)
        if source is None:
            return None
        if path not in self._maps:
            try:
                self._maps[path] = self._linemap(source.read_bytes(), path.read_bytes())
            except OSError:
                self._maps[path] = None
        lm = self._maps[path]
        return str(source), lm.source_line(line) if lm is not None else line


def _probe_archs(clang: Path, archs: Sequence[str], tmp: Path) -> list[str]:
    """The archs this root's compiler builds HIP for (a small kernel, syntax only)."""
    probe = tmp / "probe.hip"
    probe.write_text("#include <hip/hip_runtime.h>\n__global__ void k(int* p) { p[threadIdx.x] = 0; }\n")
    ok = []
    for arch in archs:
        cmd = [str(clang), "-x", "hip", f"--offload-arch={arch}", "-std=c++17", "-fsyntax-only", str(probe)]
        if subprocess.run(cmd, capture_output=True, check=False, timeout=300).returncode == 0:
            ok.append(arch)
    return ok


def unit_reads(cmd: Sequence[str], depfile: Path, origin: Mapping[Path, Path]) -> list[str] | None:
    """The CUDA sources whose translations a compile read (its -MD file; for a compile that stopped at a missing
    header, which writes none, a preprocessing pass, -M -MG, of the host side); None when neither says."""
    from tools.port.toolkits import read_depfile  # noqa: PLC0415

    read = read_depfile(depfile, Path.cwd())
    if read is None:
        deps = [*cmd[:-1], "--cuda-host-only", "-M", "-MG", "-MF", str(depfile), cmd[-1]]
        deps = [a for a in deps if a != "-fsyntax-only"]
        subprocess.run(deps, capture_output=True, check=False, timeout=900)
        read = read_depfile(depfile, Path.cwd())
    depfile.unlink(missing_ok=True)
    if read is None:
        return None
    return sorted({str(origin[f]) for f in read if f in origin})


def read_cache(path: Path) -> dict[str, dict[str, object]]:
    """The compile cache: one JSON line per compile (key, result); a line cut short by an interrupted run is
    skipped."""
    out: dict[str, dict[str, object]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "key" in entry and "row" in entry:
            out[str(entry["key"])] = entry["row"]
    return out


def compile_worker(spec_file: Path, result_file: Path) -> int:
    """Compile every unit of every engine syntax-only (in parallel over all of them, reusing the compile cache),
    classify the failures (tools/port/classify.py), map our errors to their CUDA sites."""
    from tools.hipify.mapping import load_database  # noqa: PLC0415
    from tools.port.classify import Classifier, Project  # noqa: PLC0415

    spec = json.loads(spec_file.read_text())
    clang = sorted(Path("/usr/bin").glob("clang++-[0-9]*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))[-1]
    with tempfile.TemporaryDirectory() as tmp:
        archs = _probe_archs(clang, spec["archs"], Path(tmp))
    db = load_database()
    hip_version = tuple(int(x) for x in spec["hip"].split("."))
    cuda_include = Path(spec["cuda_include"]) if spec.get("cuda_include") else None
    version = subprocess.run([str(clang), "--version"], capture_output=True, text=True, check=False).stdout
    stamp = Path("/.monarch-root").read_text() if Path("/.monarch-root").is_file() else ""
    identity = [str(clang), version, stamp, archs]
    cache_file = Path(spec["cache"])
    cache = read_cache(cache_file)
    lock = threading.Lock()
    digests: dict[Path, str] = {}

    def digest(path: Path) -> str:
        if path not in digests:
            try:
                digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                digests[path] = "-"
        return digests[path]

    tasks: list[tuple[str, Callable[[], dict[str, object]]]] = []
    deps_dir = Path(tempfile.mkdtemp(prefix="port-quality-deps-"))
    for engine, job in spec["engines"].items():
        out_root = Path(job["out"])
        origin = {Path(o): Path(s) for s, o in job["mapping"].items()}
        include_dirs = [Path(d) for d in job["include_dirs"]]
        files = [p for p in out_root.rglob("*") if p.is_file()]
        project = Project(files, origin=origin, include_dirs=include_dirs)
        classifier = Classifier(
            db=db,
            hip_version=(hip_version[0], hip_version[1]),
            hip_include=Path("/usr/include/hip"),
            project=project,
            findings=[],
            arch=",".join(archs),
            cuda_include=cuda_include,
        )
        to_source = SourceMap(origin) if job.get("sites") else None

        def one(
            src: str,
            compiled: str,
            job: dict[str, object] = job,
            classifier: Classifier = classifier,
            project: Project = project,
            include_dirs: list[Path] = include_dirs,
            to_source: SourceMap | None = to_source,
            origin: dict[Path, Path] = origin,
        ) -> dict[str, object]:
            cmd = [str(clang), "-x", "hip", *[f"--offload-arch={a}" for a in archs], "-std=c++17", "-fsyntax-only"]
            cmd += [f"-ferror-limit={job.get('error_limit', 5)}", *[f"-D{d}" for d in job.get("defines", [])]]
            cmd += [*[f"-I{d}" for d in include_dirs], compiled]
            reached, _spellings = project.closure(Path(compiled))
            depfile = deps_dir / (hashlib.sha256(compiled.encode()).hexdigest()[:16] + ".d")
            h = hashlib.sha256(json.dumps([cmd, identity, "sites, reads" if to_source else ""]).encode())
            for path in sorted(reached):
                h.update(f"{path}\0{digest(path)}\n".encode())
            key = h.hexdigest()
            hit = cache.get(key)
            if hit is not None:
                return {**hit, "cached": True}
            t = time.perf_counter()
            # ours: what the unit reads (its dependency file), for "the files no CUDA unit includes"
            run = [*cmd[:-1], "-MD", "-MF", str(depfile), compiled] if to_source is not None else cmd
            proc = subprocess.run(run, capture_output=True, text=True, errors="replace", check=False, timeout=900)
            row: dict[str, object] = {"source": src, "compiled": compiled, "rc": proc.returncode}
            row["seconds"] = round(time.perf_counter() - t, 2)
            if to_source is not None:
                row["reads"] = unit_reads(cmd, depfile, origin)
            if proc.returncode != 0:
                output = proc.stdout + proc.stderr
                cause = classifier.classify(Path(src), Path(compiled), output, cmd)
                row["cause"] = cause.to_json()
                row["first_error"] = next((ln for ln in output.splitlines() if " error: " in ln), "")[:400]
                row["errors"] = sum(1 for d in parse_diagnostics(output) if "error" in d.severity)
                if to_source is not None:
                    row["sites"] = [[at, message] for at, message in error_sites(output, to_source)]
            with lock:  # (appended as it comes: an interrupted run keeps what it compiled)
                cache[key] = row
                with cache_file.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"key": key, "row": row}) + "\n")
            return {**row, "cached": False}

        for src, compiled in job["units"]:
            tasks.append((engine, lambda src=src, compiled=compiled, one=one: one(src, compiled)))

    results: dict[str, object] = {"clang": str(clang), "archs": archs}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, int(spec["jobs"]))) as pool:
        rows = list(pool.map(lambda task: (task[0], task[1]()), tasks))
    shutil.rmtree(deps_dir, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    for engine in spec["engines"]:
        results[engine] = [row for name, row in rows if name == engine]
    result_file.write_text(json.dumps(results))
    return 0


# -- the run ---------------------------------------------------------------------------------------------------
def out_of_dir(directory: Path, corpus: Path, out: Path, out_of: dict[Path, Path]) -> Path:
    """Where an engine put a corpus directory: the parent of the output of a file directly in it."""
    for src, dst in out_of.items():
        if src.parent == directory:
            return dst.parent
    return out / os.path.relpath(directory, corpus)


def root_for(args: argparse.Namespace, hip: str) -> Path:
    for given in args.root or ():
        version, _, path = given.partition("=")
        if version == hip:
            return Path(path)
    return Path(args.roots) / f"rocm{hip}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="*", type=Path, metavar="CORPUS", help="CUDA source trees")
    ap.add_argument("--hip", default="6.4,7.2", help="the ROCm roots to compile in, comma separated (default 6.4,7.2)")
    ap.add_argument("--archs", default="gfx942,gfx950", help="offload archs, comma separated (those the HIP has)")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma separated, of {', '.join(ENGINES)}")
    ap.add_argument("--hipify-torch", type=Path, help="a ROCm/hipify_torch checkout")
    ap.add_argument("--cuda-headers", type=Path, help="CUDA <= 12.9 include directory for hipify-clang (PyPI wheels)")
    ap.add_argument("--roots", type=Path, default=ROOTS, help=f"where the rocm6.4/rocm7.2 roots are (default {ROOTS})")
    ap.add_argument("--root", action="append", metavar="HIP=DIR", help="the root of one HIP version (repeatable)")
    ap.add_argument("--clang-root", type=Path, help="a 7.2 root with hipify-clang (default: the 7.2 root)")
    ap.add_argument(
        "--clang-max-files",
        type=int,
        default=300,
        help="skip hipify-clang (~1 s a file) on a corpus with more CUDA-bearing files than this (default 300)",
    )
    ap.add_argument("--work", type=Path, help="keep translations, caches and results here (default: a temporary one)")
    ap.add_argument("--fresh", action="store_true", help="translate and compile everything again (no caches)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles / hipify-clang runs")
    ap.add_argument("--json", type=Path, help="write every result here")
    ap.add_argument("--compile-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--hipify-clang-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_worker:
        return compile_worker(*args.compile_worker)
    if args.hipify_clang_worker:
        return hipify_clang_worker(*args.hipify_clang_worker)
    if not args.corpora:
        ap.error("give at least one CORPUS directory")
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        ap.error(f"unknown engine {', '.join(unknown)} (one of {', '.join(ENGINES)})")
    hips = [h for h in args.hip.split(",") if h]
    if any(h not in ("6.4", "7.2") for h in hips):
        ap.error("--hip takes 6.4 and/or 7.2")
    roots = {hip: root_for(args, hip) for hip in hips}
    clang_root = args.clang_root or root_for(args, "7.2")
    problems = [f"corpus {c} is not a directory" for c in args.corpora if not c.is_dir()]
    for hip, root in roots.items():
        if not (root / ".monarch-root").is_file():
            problems.append(f"the ROCm {hip} root {root} is not made (ci/rocm-root.sh make {hip} {root} --with-libs)")
        elif not (root / LIB_MARKER).is_file():
            problems.append(
                f"the ROCm {hip} root {root} has no library headers in /usr/include: "
                f"ci/rocm-root.sh make {hip} {root} --with-libs (or --root {hip}=DIR)"
            )
    if "hipify_torch" in engines and (args.hipify_torch is None or not (args.hipify_torch / "hipify_cli.py").is_file()):
        problems.append(
            "hipify_torch needs --hipify-torch DIR, a ROCm/hipify_torch checkout (or leave it out of --engines)"
        )
    if "hipify-clang" in engines:
        if not (clang_root / "usr" / "bin" / "hipify-clang").is_file():
            problems.append(
                f"hipify-clang is not in {clang_root}: ci/rocm-root.sh make 7.2 {clang_root} --with-hipify-clang "
                "(--clang-root DIR)"
            )
        if args.cuda_headers is None or not (args.cuda_headers / "cuda.h").is_file():
            problems.append("hipify-clang needs --cuda-headers DIR holding CUDA <= 12.9's cuda.h (see bench/README.md)")
    if problems:
        sys.exit("port_quality: " + "; ".join(problems))
    archs = [a for a in args.archs.split(",") if a]
    work_ctx = tempfile.TemporaryDirectory(prefix="port-quality-") if args.work is None else None
    work = Path(work_ctx.name) if work_ctx is not None else args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    profiles = load_profiles()
    everything: dict[str, object] = {"hip": hips, "archs": archs, "corpora": {}}
    started = time.perf_counter()
    load_start = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    try:
        for corpus in [c.resolve() for c in args.corpora]:
            profile = profiles.get(corpus.name, Profile(corpus.name))
            run = CorpusRun(corpus, work / corpus.name, profile, engines, args, roots, clang_root, archs)
            everything["corpora"][corpus.name] = run.go()
    finally:
        everything["seconds"] = round(time.perf_counter() - started, 1)
        if args.json is not None:
            args.json.write_text(json.dumps(everything, indent=1))
        if work_ctx is not None:
            work_ctx.cleanup()
    print(
        f"\nwhole run: {time.perf_counter() - started:.0f} s; load average at the start {load_start}, "
        f"at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    return 0


class CorpusRun:
    """One corpus: translate with each engine (hipify_torch's and hipify-clang's cached), compile in each root,
    print the figures side by side."""

    def __init__(
        self,
        corpus: Path,
        work: Path,
        profile: Profile,
        engines: list[str],
        args: argparse.Namespace,
        roots: dict[str, Path],
        clang_root: Path,
        archs: list[str],
    ) -> None:
        self.corpus, self.work, self.profile, self.args = corpus, work, profile, args
        self.engines = [e for e in engines if e != "hand" or profile.hand_defines is not None]
        self.roots, self.clang_root, self.archs = roots, clang_root, archs
        self.files = corpus_files(corpus)
        self.units = corpus_units(corpus, self.files, profile)
        self.include_dirs = (
            list(profile.include_dirs) if profile.include_dirs is not None else infer_include_dirs(corpus, self.files)
        )
        self.notes: dict[str, str] = {}
        self.timing: dict[str, float] = {}

    def translate_cached(
        self, engine: str, extra: object, make: Callable[[Path], tuple[float, dict[str, str]]]
    ) -> dict[str, str] | None:
        out = self.work / engine
        saved = self.work / f"{engine}.translation.json"
        key = fingerprint(self.files, [engine, extra])
        if not self.args.fresh and saved.is_file():
            data = json.loads(saved.read_text())
            if data.get("key") == key and out.is_dir() and data.get("mapping"):
                self.timing[engine] = float(data["seconds"])
                self.notes[engine] = str(data["note"]) + " (translation reused: same corpus, options and tool)"
                return dict(data["mapping"])
        if out.exists():
            shutil.rmtree(out)
        took, mapping = make(
            out
        )  # (into a directory that does not exist: hipify_torch copies nothing into one that does)
        self.timing[engine] = took
        saved.write_text(
            json.dumps({"key": key, "seconds": took, "mapping": mapping, "note": self.notes.get(engine, "")})
        )
        return mapping

    def go(self) -> dict[str, object]:
        corpus, profile = self.corpus, self.profile
        size = sum(f.stat().st_size for f in self.files)
        self.work.mkdir(parents=True, exist_ok=True)
        print(
            f"\n== {corpus.name}: {len(self.files)} files, {size / 1e6:.1f} MB, {len(self.units)} units"
            + (f" ({profile.about})" if profile.about else "")
            + f"; include dirs {', '.join(self.include_dirs[:6]) or 'none'}{' ...' if len(self.include_dirs) > 6 else ''}",
            flush=True,
        )
        if profile.defines:
            given = [f"-D{d}" for d in profile.defines] + [f"-U{u}" for u in profile.undefines]
            print(f"   defines (a CUDA build's): {' '.join(given)}")
        if profile.hand_defines is not None:
            print(f"   their hand port: {profile.hand_about}; {' '.join('-D' + d for d in profile.hand_defines)}")
        mappings: dict[str, dict[str, str]] = {}
        bad = non_utf8(self.files)
        if "hipify_torch" in self.engines:
            checkout = self.args.hipify_torch.resolve()
            tool = fingerprint(sorted(checkout.glob("**/*.py")), "hipify_torch")

            def torch(out: Path) -> tuple[float, dict[str, str]]:
                return run_hipify_torch(corpus, out, checkout, self.include_dirs, bad)

            self.notes["hipify_torch"] = f"{len(bad)} non-UTF-8 files left out (it stops on them)" if bad else ""
            got = self.translate_cached("hipify_torch", [tool, self.include_dirs, [str(b) for b in bad]], torch)
            if got is not None:
                mappings["hipify_torch"] = got
        if "hipify-clang" in self.engines:
            bearing = cuda_bearing(self.files)
            if len(bearing) > self.args.clang_max_files:
                self.notes["hipify-clang"] = (
                    f"skipped: {len(bearing)} CUDA-bearing files > --clang-max-files {self.args.clang_max_files} "
                    f"(~1 s a file, 2 at a time: ~{len(bearing) // 2 // 60 + 1} min; raise it to run)"
                )
            else:
                stamp = (self.clang_root / ".monarch-root").read_text()
                cuda = self.args.cuda_headers.resolve()

                def hclang(out: Path) -> tuple[float, dict[str, str]]:
                    out.mkdir(parents=True)
                    took, mapping, failed = run_hipify_clang(
                        corpus,
                        out,
                        self.files,
                        bearing,
                        self.include_dirs,
                        profile.defines,
                        cuda,
                        self.clang_root,
                        self.args.jobs,
                    )
                    aborted = sum(1 for w in failed.values() if "134" in w)
                    failed_units = sum(1 for s in failed if s.endswith(".cu"))
                    self.notes["hipify-clang"] = (
                        f"{len(bearing)} files given; failed on {len(failed)} ({aborted} aborted, {failed_units} .cu; "
                        f"left untranslated), {self.args.jobs} at a time"
                    )
                    return took, mapping

                extra = [stamp, str(cuda), self.include_dirs, list(profile.defines)]
                got = self.translate_cached("hipify-clang", extra, hclang)
                if got is not None:
                    mappings["hipify-clang"] = got
        for engine in ("hipify_torch", "hipify-clang"):
            if engine in self.engines:
                took = self.timing.get(engine)
                what = f"translated in {took:6.1f} s wall" if took is not None else ""
                print(f"  {engine:<13} {what} {self.notes.get(engine, '')}".rstrip(), flush=True)

        per_hip: dict[str, dict[str, object]] = {}
        for hip, root in self.roots.items():
            per_hip[hip] = self.one_hip(hip, root, mappings)
        self.print_table(per_hip)
        return {
            "units": len(self.units),
            "bytes": size,
            "include_dirs": self.include_dirs,
            "defines": list(profile.defines),
            "notes": self.notes,
            "timing": self.timing,
            "hip": per_hip,
        }

    def one_hip(self, hip: str, root: Path, mappings: dict[str, dict[str, str]]) -> dict[str, object]:
        corpus = self.corpus
        jobs: dict[str, dict[str, object]] = {}
        report: dict[str, object] = {}
        if "ours" in self.engines:
            out = self.work / f"ours-{hip}"
            took, mapping, report = run_ours(corpus, out, hip, self.profile.defines, self.profile.undefines)
            self.timing[f"ours {hip}"] = took
            print(f"  ours (HIP {hip})  translated in {took:6.2f} s wall", flush=True)
            mappings = {"ours": mapping, **mappings}
        for engine in ("ours", "hipify_torch", "hipify-clang"):
            if engine not in mappings:
                continue
            out = self.work / (f"ours-{hip}" if engine == "ours" else engine)
            out_of = {Path(s): Path(o) for s, o in mappings[engine].items()}
            units = [[str(u), str(out_of[u])] for u in self.units if u in out_of and out_of[u].is_file()]
            jobs[engine] = {
                "out": str(out),
                "mapping": {str(k): str(v) for k, v in out_of.items()},
                "units": units,
                "include_dirs": [str(out_of_dir(corpus / d, corpus, out, out_of)) for d in self.include_dirs],
                "defines": list(self.profile.defines),
                "error_limit": 0 if engine == "ours" else 5,  # every error of ours: its error sites
                "sites": engine == "ours",
            }
        if "hand" in self.engines and self.profile.hand_defines is not None:
            identity = {str(f): str(f) for f in self.files}
            jobs["hand"] = {
                "out": str(corpus),
                "mapping": identity,
                "units": [[str(u), str(u)] for u in self.units],
                "include_dirs": [str(corpus / d) for d in self.include_dirs],
                "defines": list(self.profile.hand_defines),
                "error_limit": 5,
                "sites": False,
            }
        spec: dict[str, object] = {
            "hip": hip,
            "archs": self.archs,
            "jobs": self.args.jobs,
            "engines": jobs,
            "cache": str(self.work / ("compile-cache.jsonl" if not self.args.fresh else f"fresh-{hip}.jsonl")),
        }
        if self.args.fresh:  # (a cache of this run only)
            (self.work / f"fresh-{hip}.jsonl").unlink(missing_ok=True)
        if self.args.cuda_headers is not None:
            spec["cuda_include"] = str(self.args.cuda_headers.resolve())
        spec_file, result_file = self.work / f"compile-{hip}.spec.json", self.work / f"compile-{hip}.result.json"
        spec_file.write_text(json.dumps(spec))
        binds = [self.work, corpus, REPO] + ([self.args.cuda_headers.resolve()] if self.args.cuda_headers else [])
        t = time.perf_counter()
        argv = [
            "python3",
            str(REPO / "bench" / "port_quality.py"),
            "--compile-worker",
            str(spec_file),
            str(result_file),
        ]
        in_root(root, binds, argv)
        results = json.loads(result_file.read_text())
        total = sum(len(j["units"]) for j in jobs.values())
        cached = sum(1 for e in jobs for r in results[e] if r.get("cached"))
        print(
            f"  HIP {hip}: compiled {total} units ({cached} from the compile cache) in {time.perf_counter() - t:.0f} s "
            f"with {results['clang']} for {', '.join(results['archs'])}",
            flush=True,
        )
        out: dict[str, object] = {"archs": results["archs"], "seconds": results["seconds"], "engines": {}}
        for engine in jobs:
            rows = results[engine]
            out["engines"][engine] = {
                "compiled": sum(1 for r in rows if r["rc"] == 0),
                "units": len(self.units),
                "with_output": len(rows),
                "classes": dict(Counter(r["cause"]["class"] for r in rows if r["rc"] != 0)),
                "rows": rows,
            }
        if "ours" in jobs:
            out["ours"] = self.ours_report(report, results["ours"])
        return out

    def ours_report(self, report: dict[str, object], rows: list[dict[str, object]]) -> dict[str, object]:
        findings = list(report["findings"])
        blocking = {(str(f["file"]), int(f["line"])) for f in findings if f["blocking"]}
        failures = [r for r in rows if r["rc"] != 0]
        sites = distinct_sites(r.get("sites", []) for r in failures)
        unflagged = unflagged_sites(sites, blocking)
        reads = {str(r["source"]): r.get("reads") for r in rows}
        graph = dict(report.get("includes", {}))
        outside = blocking_outside_units(findings, graph, [str(u) for u in self.units], reads)
        host = cuda_host_code({str(f["file"]) for f in outside}, graph, _is_cuda_header)
        return {
            "failures": len(failures),
            "unexplained": [
                {"unit": os.path.relpath(str(r["source"]), self.corpus), "reason": r["cause"]["reason"]}
                for r in failures
                if r["cause"]["class"] == "other"
            ],
            "sites": len(sites),
            "unflagged_sites": [
                {"at": f"{os.path.relpath(f, self.corpus)}:{n}", "message": sites[(f, n)][1]} for f, n in unflagged
            ],
            "outside_units": len(outside),
            "outside_in_host_code": sum(1 for f in outside if str(f["file"]) in host),
            "outside_by_file": dict(
                Counter(os.path.relpath(str(f["file"]), self.corpus) for f in outside).most_common()
            ),
        }

    def print_table(self, per_hip: dict[str, dict[str, object]]) -> None:
        from tools.port.classify import CLASSES  # noqa: PLC0415

        hips = list(per_hip)
        width = 44
        head = "".join(f"{'HIP ' + h + ' (' + ', '.join(per_hip[h]['archs']) + ')':<{width}}" for h in hips)
        print(f"  {'':<34}{head}")

        def row(label: str, cells: list[str]) -> None:
            print(f"  {label:<34}" + "".join(f"{c:<{width}}" for c in cells))

        for engine in self.engines:
            cells = []
            for h in hips:
                e = per_hip[h]["engines"].get(engine)
                if e is None:
                    cells.append(self.notes.get(engine, "not run")[: width - 2])
                    continue
                missing = e["units"] - e["with_output"]
                cells.append(f"{e['compiled']} / {e['units']}" + (f" ({missing} without output)" if missing else ""))
            row(f"units compiled: {LABELS[engine]}", cells)
        for engine in self.engines:
            if all(engine not in per_hip[h]["engines"] for h in hips):
                continue
            cells = []
            for h in hips:
                e = per_hip[h]["engines"].get(engine)
                classes = e["classes"] if e else {}
                cells.append(", ".join(f"{c} {classes[c]}" for c in CLASSES if classes.get(c)) or "-")
            row(f"first errors: {LABELS[engine]}", cells)
        if "ours" in self.engines:
            ours = [per_hip[h].get("ours", {}) for h in hips]
            row("ours: unexplained first errors", [str(len(o.get("unexplained", []))) for o in ours])
            row(
                "ours: error sites, unflagged",
                [
                    f"{o.get('sites', 0)} sites, {len(o.get('unflagged_sites', []))} without a blocking finding"
                    for o in ours
                ],
            )
            row(
                "ours: blocking, outside the units",
                [
                    f"{o.get('outside_units', 0)} ({o.get('outside_in_host_code', 0)} in CUDA host code, "
                    f"{o.get('outside_units', 0) - o.get('outside_in_host_code', 0)} elsewhere)"
                    for o in ours
                ],
            )
            for h, o in zip(hips, ours):
                for u in o.get("unexplained", []):
                    print(f"    HIP {h} unexplained: {u['unit']}: {u['reason']}")
                outside = o.get("outside_by_file", {})
                if outside:
                    top = ", ".join(f"{k} {v}" for k, v in list(outside.items())[:8])
                    print(f"    HIP {h} blocking findings in files no unit includes: {top}")
                for site in o.get("unflagged_sites", [])[:15]:
                    print(f"    HIP {h} error site without a blocking finding: {site['at']}: {site['message'][:150]}")
                if len(o.get("unflagged_sites", [])) > 15:
                    print(f"    ... {len(o['unflagged_sites']) - 15} more (--json)")
        row("compile time (s, 2 at a time)", [f"{per_hip[h]['seconds']}" for h in hips])


if __name__ == "__main__":
    sys.exit(main())
