"""Port quality: translate public CUDA projects with three engines and count the units that compile for ROCm.

    python bench/port_quality.py CORPUS [CORPUS...] [--hip 6.4] [--archs gfx942] [--hipify-torch DIR]
                                 [--cuda-headers DIR] [--engines ours,hipify_torch,hipify-clang] [--json FILE]

Engines: ours (``python -m tools hipify``), hipify_torch (its ``hipify_cli.py --v2``, a checkout given with
``--hipify-torch``) and hipify-clang (in the ROCm 7.2 root made with ``ci/rocm-root.sh make 7.2 DIR
--with-hipify-clang``, fed CUDA 12.9 headers from PyPI with ``--cuda-headers``; see bench/README.md). Each engine
translates the whole corpus into its own directory, timed end to end (start-up included). Then every translated
``.cu`` unit is compiled syntax-only with HIP-Clang in the ROCm root of ``--hip`` (made with ``--with-libs``: the
hipCUB/rocThrust/hipBLAS/... headers), for ``--archs``, with the corpus's include directories (inferred: where a
file's ``#include`` that is not beside it is found), and every failure is classified by tools/port/classify.py
(what ``tools port``/``tools check`` report). For our engine it also says whether each failure was reported:
explained by the check (a class other than "other") and whether hipify's report already had a blocking finding on
the unit or a project header it includes. Nothing from a corpus is kept outside ``--work``.

It prints figures; it is not a test. Inside a root it runs itself as a worker (``--compile-worker``,
``--hipify-clang-worker``): those modes need only the standard library and tools/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.hipify.tree import is_system_header  # noqa: E402

ROOTS = Path(os.environ.get("MONARCH_TOOLCHAINS", Path.home() / ".cache" / "monarch-runtime" / "toolchains")) / "roots"
ENGINES = ("ours", "hipify_torch", "hipify-clang")
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hxx", ".inl", ".cpp", ".cc", ".cxx", ".c")
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\r\n]+)[>"]', re.M)
# what makes a file worth handing to hipify-clang (it parses every file it is given: seconds each)
_CUDA_BEARING = re.compile(
    rb"\b(?:cuda\w*|cu[A-Z]\w*|CU_\w+|CUDA\w*|cublas\w*|curand\w*|cufft\w*|cusparse\w*|cusolver\w*|nccl\w*|"
    rb"__global__|__device__|__shared__|threadIdx|blockIdx|__syncthreads)\b|<<<"
)
LIB_INCLUDE = "/opt/rocm-libs/usr/include"  # where --with-libs unpacks the libraries' headers inside a root


# -- corpus ----------------------------------------------------------------------------------------------------
def corpus_files(corpus: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".")]
    return out


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


# -- engines ---------------------------------------------------------------------------------------------------
def run_ours(corpus: Path, out: Path, hip: str) -> tuple[float, dict[str, str], list[dict[str, object]]]:
    report = out.parent / f"{out.name}.report.json"
    cmd = [sys.executable, "-m", "tools", "hipify", str(corpus), "-o", str(out), "--hip-version", hip]
    cmd += ["--report", str(report), "-q"]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stderr=subprocess.DEVNULL)
    took = time.perf_counter() - t
    data = json.loads(report.read_text())
    mapping = {str(f["source"]): str(f["output"]) for f in data["files"]}
    return took, mapping, list(data["findings"])


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


def cuda_bearing(files: list[Path]) -> list[Path]:
    """The files hipify-clang is given (it parses each one: seconds a file): sources that mention CUDA."""
    return [f for f in files if f.suffix in SOURCE_SUFFIXES and _CUDA_BEARING.search(f.read_bytes())]


def run_hipify_clang(
    corpus: Path, out: Path, files: list[Path], include_dirs: list[str], cuda_headers: Path, root72: Path, jobs: int
) -> tuple[float, dict[str, str], dict[str, str]]:
    """hipify-clang on every CUDA-bearing file, one call per file (faster than one call for many), in the 7.2 root.
    Returns (seconds, source -> output, source -> why it failed)."""
    bearing = cuda_bearing(files)
    spec = {
        "files": [str(f) for f in bearing],
        "corpus": str(corpus),
        "out": str(out),
        "includes": [str(corpus / d) for d in include_dirs],
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
    cmd = ["bash", str(REPO / "ci" / "rocm-root.sh"), "run", str(root)]
    for b in dict.fromkeys(binds):
        cmd += ["--bind", str(b)]
    cmd += ["--", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(
            f"port_quality: in the root {root}, {' '.join(argv[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )


# -- workers (inside a root) ---------------------------------------------------------------------------------
def hipify_clang_worker(spec_file: Path, result_file: Path) -> int:
    spec = json.loads(spec_file.read_text())
    corpus, out = Path(spec["corpus"]), Path(spec["out"])
    incs = [f"-I{d}" for d in spec["includes"]]

    def one(src: str) -> tuple[str, str]:
        dst = out / os.path.relpath(src, corpus)
        dst.parent.mkdir(parents=True, exist_ok=True)
        base = ["hipify-clang", src, f"--cuda-path={spec['cuda_path']}", "--cuda-gpu-arch=sm_80", "-o", str(dst), *incs]
        why = ""
        for extra in ([], ["--default-preprocessor"]):  # a maintainer's second try: only the active branches
            proc = subprocess.run([*base, *extra], capture_output=True, text=True, check=False, timeout=600)
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


def compile_worker(spec_file: Path, result_file: Path) -> int:
    """Compile every unit of every engine syntax-only, classify the failures (tools/port/classify.py)."""
    from tools.hipify.mapping import load_database  # noqa: PLC0415
    from tools.port.classify import Classifier, Project  # noqa: PLC0415

    spec = json.loads(spec_file.read_text())
    clang = sorted(Path("/usr/bin").glob("clang++-[0-9]*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))[-1]
    db = load_database()
    hip_version = tuple(int(x) for x in spec["hip"].split("."))
    cuda_include = Path(spec["cuda_include"]) if spec.get("cuda_include") else None
    results: dict[str, object] = {"clang": str(clang)}
    for engine, job in spec["engines"].items():
        out_root = Path(job["out"])
        origin = {Path(o): Path(s) for s, o in job["mapping"].items()}
        include_dirs = [Path(d) for d in job["include_dirs"]]
        files = [p for p in out_root.rglob("*") if p.is_file()]
        classifier = Classifier(
            db=db,
            hip_version=(hip_version[0], hip_version[1]),
            hip_include=Path("/usr/include/hip"),
            project=Project(files, origin=origin, include_dirs=include_dirs),
            findings=[],
            arch=",".join(spec["archs"]),
            cuda_include=cuda_include,
        )

        def one(
            unit: tuple[str, str], classifier: Classifier = classifier, include_dirs: list[Path] = include_dirs
        ) -> dict[str, object]:
            src, compiled = unit
            cmd = [str(clang), "-x", "hip", *[f"--offload-arch={a}" for a in spec["archs"]], "-std=c++17"]
            cmd += ["-fsyntax-only", "-ferror-limit=5", *[f"-I{d}" for d in include_dirs], f"-I{LIB_INCLUDE}", compiled]
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False, timeout=600)
            row: dict[str, object] = {"source": src, "compiled": compiled, "rc": proc.returncode}
            row["seconds"] = round(time.perf_counter() - t, 2)
            if proc.returncode != 0:
                output = proc.stdout + proc.stderr
                cause = classifier.classify(Path(src), Path(compiled), output, cmd)
                row["cause"] = cause.to_json()
                row["first_error"] = next((ln for ln in output.splitlines() if " error: " in ln), "")[:400]
            return row

        with ThreadPoolExecutor(max_workers=max(1, int(spec["jobs"]))) as pool:
            results[engine] = list(pool.map(one, [tuple(u) for u in job["units"]]))
    result_file.write_text(json.dumps(results))
    return 0


# -- the run ---------------------------------------------------------------------------------------------------
def closure(src: Path, corpus_files_set: set[Path], include_dirs: list[Path]) -> set[Path]:
    """The unit and the corpus files it includes, transitively (for "did hipify report it")."""
    seen: set[Path] = set()
    todo = [src]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        try:
            data = f.read_bytes()
        except OSError:
            continue
        for m in _INCLUDE.finditer(data):
            spelling = m.group(1).decode("latin-1")
            for base in (f.parent, *include_dirs):
                cand = Path(os.path.normpath(base / spelling))
                if cand in corpus_files_set:
                    todo.append(cand)
                    break
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="*", type=Path, metavar="CORPUS", help="CUDA source trees")
    ap.add_argument("--hip", default="6.4", choices=("6.4", "7.2"), help="the ROCm root to compile in (default 6.4)")
    ap.add_argument("--archs", default="gfx942", help="offload archs, comma separated (default gfx942)")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma separated, of {', '.join(ENGINES)}")
    ap.add_argument("--hipify-torch", type=Path, help="a ROCm/hipify_torch checkout")
    ap.add_argument("--cuda-headers", type=Path, help="CUDA <= 12.9 include directory for hipify-clang (PyPI wheels)")
    ap.add_argument("--roots", type=Path, default=ROOTS, help=f"where the rocm6.4/rocm7.2 roots are (default {ROOTS})")
    ap.add_argument("--work", type=Path, help="keep translations and results here (default: a temporary directory)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles / hipify-clang runs")
    ap.add_argument("--json", type=Path, help="write every result here")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="with --work: reuse hipify_torch's and hipify-clang's translations from a run before",
    )
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
    root = args.roots / f"rocm{args.hip}"
    root72 = args.roots / "rocm7.2"
    problems = [f"corpus {c} is not a directory" for c in args.corpora if not c.is_dir()]
    if not (root / ".monarch-root").is_file():
        problems.append(
            f"the ROCm {args.hip} root {root} is not made (ci/rocm-root.sh make {args.hip} {root} --with-libs)"
        )
    elif not (root / LIB_INCLUDE.lstrip("/")).is_dir():
        problems.append(f"the root {root} has no library headers: ci/rocm-root.sh make {args.hip} {root} --with-libs")
    if "hipify_torch" in engines and (args.hipify_torch is None or not (args.hipify_torch / "hipify_cli.py").is_file()):
        problems.append(
            "hipify_torch needs --hipify-torch DIR, a ROCm/hipify_torch checkout (or leave it out of --engines)"
        )
    if "hipify-clang" in engines:
        if not (root72 / "usr" / "bin" / "hipify-clang").is_file():
            problems.append(f"hipify-clang is not in {root72}: ci/rocm-root.sh make 7.2 {root72} --with-hipify-clang")
        if args.cuda_headers is None or not (args.cuda_headers / "cuda.h").is_file():
            problems.append("hipify-clang needs --cuda-headers DIR holding CUDA <= 12.9's cuda.h (see bench/README.md)")
    if problems:
        sys.exit("port_quality: " + "; ".join(problems))
    archs = [a for a in args.archs.split(",") if a]
    work_ctx = tempfile.TemporaryDirectory(prefix="port-quality-") if args.work is None else None
    work = Path(work_ctx.name) if work_ctx is not None else args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    everything: dict[str, object] = {"hip": args.hip, "archs": archs, "corpora": {}}
    try:
        for corpus in [c.resolve() for c in args.corpora]:
            everything["corpora"][corpus.name] = one_corpus(
                corpus, work / corpus.name, engines, args, root, root72, archs
            )  # type: ignore[index]
    finally:
        if args.json is not None:
            args.json.write_text(json.dumps(everything, indent=1))
        if work_ctx is not None:
            work_ctx.cleanup()
    return 0


def one_corpus(
    corpus: Path, work: Path, engines: list[str], args: argparse.Namespace, root: Path, root72: Path, archs: list[str]
) -> dict[str, object]:
    files = corpus_files(corpus)
    size = sum(f.stat().st_size for f in files)
    units = [f for f in files if f.suffix == ".cu"]
    include_dirs = infer_include_dirs(corpus, files)
    bad = non_utf8(files)
    print(
        f"\n== {corpus.name}: {len(files)} files, {size / 1e6:.1f} MB, {len(units)} .cu units; include dirs "
        f"{', '.join(include_dirs[:6]) or 'none'}{' ...' if len(include_dirs) > 6 else ''}; HIP {args.hip}, "
        f"{', '.join(archs)}",
        flush=True,
    )
    if work.exists() and not args.reuse:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    jobs: dict[str, dict[str, object]] = {}
    timing: dict[str, float] = {}
    notes: dict[str, str] = {}
    findings: list[dict[str, object]] = []
    for engine in engines:
        out = work / engine
        saved = work / f"{engine}.translation.json"
        if args.reuse and engine != "ours" and saved.is_file():  # hipify_torch and hipify-clang ignore --hip
            data = json.loads(saved.read_text())
            took, mapping, notes[engine] = float(data["seconds"]), dict(data["mapping"]), str(data["note"])
        elif engine == "ours":
            if out.exists():
                shutil.rmtree(out)
            took, mapping, findings = run_ours(corpus, out, args.hip)
        elif engine == "hipify_torch":
            if out.exists():
                shutil.rmtree(out)
            took, mapping = run_hipify_torch(corpus, out, args.hipify_torch.resolve(), include_dirs, bad)
            notes[engine] = f"{len(bad)} non-UTF-8 files left out (it stops on them)" if bad else ""
        else:
            if out.exists():
                shutil.rmtree(out)
            out.mkdir(parents=True)
            took, mapping, failed = run_hipify_clang(
                corpus, out, files, include_dirs, args.cuda_headers.resolve(), root72, args.jobs
            )
            aborted = sum(1 for w in failed.values() if "134" in w)
            failed_units = sum(1 for s in failed if s.endswith(".cu"))
            notes[engine] = (
                f"failed on {len(failed)} files ({aborted} aborted, {failed_units} .cu units; left untranslated), "
                f"{args.jobs} in parallel"
            )
        timing[engine] = took
        saved.write_text(json.dumps({"seconds": took, "mapping": mapping, "note": notes.get(engine, "")}))
        out_of = {Path(s): Path(o) for s, o in mapping.items()}
        unit_jobs = [[str(u), str(out_of[u])] for u in units if u in out_of and out_of[u].is_file()]
        inc = [str(out_of_dir(corpus / d, corpus, out, out_of)) for d in include_dirs]
        jobs[engine] = {"out": str(out), "mapping": {str(k): str(v) for k, v in out_of.items()}, "units": unit_jobs}
        jobs[engine]["include_dirs"] = inc
        print(
            f"  {engine:<13} translated in {took:6.2f} s wall ({size / 1e6 / took:6.1f} MB/s) {notes.get(engine, '')}",
            flush=True,
        )
    spec = {"hip": args.hip, "archs": archs, "jobs": args.jobs, "engines": jobs}
    if args.cuda_headers is not None:
        spec["cuda_include"] = str(args.cuda_headers.resolve())
    spec_file, result_file = work / "compile.spec.json", work / "compile.result.json"
    spec_file.write_text(json.dumps(spec))
    t = time.perf_counter()
    binds = [work, corpus, REPO] + ([args.cuda_headers.resolve()] if args.cuda_headers is not None else [])
    in_root(
        root,
        binds,
        ["python3", str(REPO / "bench" / "port_quality.py"), "--compile-worker", str(spec_file), str(result_file)],
    )
    results = json.loads(result_file.read_text())
    print(
        f"  compiled {sum(len(j['units']) for j in jobs.values())} units in {time.perf_counter() - t:.0f} s with {results['clang']}"
    )
    from tools.port.classify import CLASSES  # noqa: PLC0415

    header = f"  {'engine':<13} {'compiled':>10}  failures by class"
    print(header)
    summary: dict[str, object] = {"units": len(units), "bytes": size, "include_dirs": include_dirs, "engines": {}}
    for engine in engines:
        rows = results[engine]
        ok = sum(1 for r in rows if r["rc"] == 0)
        missing = len(units) - len(rows)  # no output to compile
        classes = Counter(r["cause"]["class"] for r in rows if r["rc"] != 0)
        by = ", ".join(f"{c} {classes[c]}" for c in CLASSES if classes[c]) or "none"
        extra = f"; {missing} units without output" if missing else ""
        print(f"  {engine:<13} {ok:>4} / {len(units):<4}  {by}{extra}")
        summary["engines"][engine] = {  # type: ignore[index]
            "compiled": ok,
            "units": len(units),
            "seconds": timing[engine],
            "mb_per_s": size / 1e6 / timing[engine],
            "classes": dict(classes),
            "note": notes.get(engine, ""),
            "rows": rows,
        }
    if "ours" in engines:
        report_ours(corpus, files, include_dirs, findings, results["ours"], summary)
    return summary


def out_of_dir(directory: Path, corpus: Path, out: Path, out_of: dict[Path, Path]) -> Path:
    """Where an engine put a corpus directory: the parent of the output of a file directly in it."""
    for src, dst in out_of.items():
        if src.parent == directory:
            return dst.parent
    return out / os.path.relpath(directory, corpus)


def report_ours(
    corpus: Path,
    files: list[Path],
    include_dirs: list[str],
    findings: list[dict[str, object]],
    rows: list[dict[str, object]],
    summary: dict[str, object],
) -> None:
    blocking: dict[Path, list[str]] = {}
    for f in findings:
        if f["blocking"]:
            blocking.setdefault(Path(str(f["file"])), []).append(f"{f['name']} [{f['kind']}]")
    file_set = set(files)
    dirs = [corpus / d for d in include_dirs]
    failures = [r for r in rows if r["rc"] != 0]
    explained = [r for r in failures if r["cause"]["class"] != "other"]  # type: ignore[index]
    hipify_flagged = []
    for r in failures:
        reach = closure(Path(str(r["source"])), file_set, dirs)
        if any(blocking.get(p) for p in reach):
            hipify_flagged.append(r)
    print(
        f"  ours: {len(failures)} failures; {len(explained)} explained by the check's classification (a class other "
        f"than 'other'); {len(hipify_flagged)} also had a blocking hipify finding on the unit or a header it includes; "
        f"{len(failures) - len(explained)} unexplained"
    )
    for r in failures:
        cause = r["cause"]
        if cause["class"] == "other":  # type: ignore[index]
            print(f"    unexplained: {os.path.relpath(str(r['source']), corpus)}: {cause['reason']}")  # type: ignore[index]
    summary["ours_reported"] = {
        "failures": len(failures),
        "explained": len(explained),
        "hipify_flagged": len(hipify_flagged),
    }


if __name__ == "__main__":
    sys.exit(main())
