"""What a ``python -m tools hipify`` run leaves behind, as digests; and today's digests of the public corpora.

    python bench/hipify_digest.py compare [--corpora DIR] [NAME...]   # a fresh run against bench/digests/NAME.txt
    python bench/hipify_digest.py record [--corpora DIR] [NAME...]    # write them again (review the diff!)

NAME is one of the public corpora of bench/README.md ("Inputs"): cuda-samples, llm.c, apex, found under
``--corpora`` (default /tmp/pb/corpora). For each option set of ``OPTION_SETS`` the whole tree is hipified into a
fresh directory and the run is reduced to lines: the exit status, the digests of stderr, of the report and of the
state file (``.hipify-state.json``; both without their timings: the report's ``seconds``, the state's output
mtimes; paths as ``SRC``/``OUT``; the tool's own code fingerprint as ``TOOL``), the summary line, and one row per
output file with its digest under each option set. ``compare`` prints every difference and exits 1 when there is
one. Digests are the first 16 hex digits of SHA-256.

The run and the reduction are also what the golden tests use (tests/hipify/frozen.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIGESTS = REPO / "bench" / "digests"
STATE_FILE = ".hipify-state.json"

#: option set name -> the options (the public corpora's digest lists have one column per set)
OPTION_SETS: dict[str, tuple[str, ...]] = {
    "5.2": ("--hip-version", "5.2"),
    "6.4": ("--hip-version", "6.4"),
    "7.2": ("--hip-version", "7.2"),
    "7.2x": ("--hip-version", "7.2", "--launch", "hipLaunchKernelGGL", "--translate-comments"),
}
#: the public corpora (bench/README.md, "Inputs"): directory name -> the commit the digests were made from
CORPORA = {"cuda-samples": "c94ff366ae", "llm.c": "f1e2ace651", "apex": "6424da3b4f"}

_SECONDS = re.compile(rb'\n "seconds": [0-9.e+-]+\n')
_MTIME = re.compile(rb'"out_mtime_ns":\d+,')
_TOOL = re.compile(rb'"fingerprint":"[0-9a-f]{16}/')
_PID = re.compile(r"\.[0-9]+\.(hipify-tmp|tmp)\b")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def placed(text: str, places: Mapping[str, str]) -> str:
    """``text`` with each absolute path of ``places`` (longest first) written as its placeholder, and the process
    id in temporary names (``.out.1234.hipify-tmp``) as PID."""
    for path, name in sorted(places.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    return _PID.sub(r".PID.\1", text)


def normalized(name: str, data: bytes, places: Mapping[str, str]) -> bytes:
    """A file's bytes as compared: hipify's JSON (the state file, reports) without timings, the tool's code
    fingerprint or the run's paths; every other file as it is."""
    if name != STATE_FILE and not name.endswith(".json"):
        return data
    data = _SECONDS.sub(b"\n", _MTIME.sub(b"", data))
    data = _TOOL.sub(b'"fingerprint":"TOOL/', data)
    for path, place in sorted(places.items(), key=lambda kv: -len(kv[0])):
        data = data.replace(path.encode("utf-8", "surrogateescape"), place.encode())
    return data


def _rel_text(rel: str) -> str:
    """A relative path as text (a file name that is not UTF-8 keeps its bytes as escapes)."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def tree(root: Path, places: Mapping[str, str]) -> dict[str, str]:
    """Everything under ``root``: relative path -> ``file DIGEST`` (of the normalised bytes), ``dir`` or
    ``link -> TARGET``; empty when ``root`` does not exist."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*dirnames, *sorted(filenames)]:
            path = os.path.join(dirpath, name)
            rel = _rel_text(os.path.relpath(path, root))
            if os.path.islink(path):
                found[rel] = f"link -> {placed(_rel_text(os.readlink(path)), places)}"
            elif os.path.isdir(path):
                found[rel] = "dir"
            else:
                with open(path, "rb") as fh:
                    found[rel] = f"file {digest(normalized(name, fh.read(), places))}"
    return found


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None], cwd: Path | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    here = os.getcwd()
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _as_printed(text: str) -> str:
    """What a console stream (UTF-8, ``backslashreplace``) shows of ``text``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def run_hipify(
    argv: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    subprocess_run: bool = False,
) -> tuple[int, str, str]:
    """``python -m tools hipify ARGV``: (exit status, stdout, stderr), in this process (``tools.__main__.main``,
    the command's own entry point) or in a fresh one. ``env`` entries set (None: unset) for the run; COLUMNS=80
    always (argparse's messages)."""
    extra = {"COLUMNS": "80", **(env or {})}
    if subprocess_run:
        child = {k: v for k, v in os.environ.items() if k not in extra}
        child.update({k: v for k, v in extra.items() if v is not None})
        child["PYTHONPATH"] = str(REPO)
        proc = subprocess.run(
            [sys.executable, "-m", "tools", "hipify", *argv],
            capture_output=True,
            cwd=cwd or REPO,
            env=child,
            check=False,
            timeout=600,
        )
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tools.__main__ import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with _environment(extra, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["hipify", *argv])
        except SystemExit as stop:  # argparse's usage errors
            rc = stop.code if isinstance(stop.code, int) else 1
    return rc, _as_printed(out.getvalue()), _as_printed(err.getvalue())


# -- the public corpora --------------------------------------------------------------------------------------


def corpus_lines(corpus: Path, work: Path, *, subprocess_run: bool = True) -> list[str]:
    """The digest list of ``corpus``: every option set of ``OPTION_SETS``, each into a fresh directory."""
    columns: dict[str, dict[str, str]] = {}
    head: list[str] = []
    for name, options in OPTION_SETS.items():
        out, report = work / f"out-{name}", work / f"report-{name}.json"
        places = {str(corpus): "SRC", str(out): "OUT", str(report): "REPORT"}
        argv = [str(corpus), "-o", str(out), "--report", str(report), "-q", *options]
        rc, stdout, stderr = run_hipify(argv, subprocess_run=subprocess_run)
        stderr = placed(stderr, places)
        summary = stderr.splitlines()[-1] if stderr else ""
        report_bytes = report.read_bytes() if report.exists() else b""
        head += [
            f"option {name}: {' '.join(options)}",
            f"  exit {rc}",
            f"  summary {summary}",
            f"  stderr {digest(stderr.encode())} stdout {digest(placed(stdout, places).encode())}",
            f"  report {digest(normalized('report.json', report_bytes, places))}",
        ]
        files = tree(out, places)
        head.append(f"  state {files.pop(STATE_FILE, 'absent')}")
        columns[name] = files
    rows = sorted(set().union(*columns.values()))
    body = []
    for rel in rows:
        cells = [columns[n].get(rel, "-").removeprefix("file ") for n in OPTION_SETS]
        body.append(f"{rel}\t" + ("\t".join(cells) if len(set(cells)) > 1 else cells[0]))
    about = f"path, then one column per option set ({', '.join(OPTION_SETS)}), or one when they are all equal"
    return [*head, f"outputs ({len(rows)}): {about}", *body]


def _digest_file(name: str) -> Path:
    return DIGESTS / f"{name}.txt"


def _header(name: str, corpus: Path) -> list[str]:
    files = sum(len(f) for _d, _s, f in os.walk(corpus))
    return [
        f"# bench/digests/{name}.txt: what python -m tools hipify makes of {name} (commit {CORPORA[name]}), per",
        "# option set; written by `python bench/hipify_digest.py record` (review the diff), checked by `... compare`.",
        f"corpus {name}: {files} files",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("compare", "record"))
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"corpora (default: all of {', '.join(CORPORA)})")
    ap.add_argument("--corpora", type=Path, default=Path("/tmp/pb/corpora"), help="where the corpora are")
    ap.add_argument(
        "--work", type=Path, help="where the outputs go (default: a temporary directory; /dev/shm is quick)"
    )
    ap.add_argument("--in-process", action="store_true", help="run hipify in this process (default: a fresh one)")
    args = ap.parse_intermixed_args(argv)
    names = args.names or list(CORPORA)
    unknown = [n for n in names if n not in CORPORA]
    if unknown:
        ap.error(f"unknown corpus {', '.join(unknown)} (one of {', '.join(CORPORA)})")
    different = 0
    for name in names:
        corpus = (args.corpora / name).resolve()
        if not corpus.is_dir():
            print(f"{name}: not found at {corpus} (bench/README.md, 'Inputs', says how to get it)", file=sys.stderr)
            return 2
        work = Path(tempfile.mkdtemp(prefix=f"hipify-digest-{name}-", dir=args.work))
        try:
            lines = [*_header(name, corpus), *corpus_lines(corpus, work, subprocess_run=not args.in_process)]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        path = _digest_file(name)
        if args.action == "record":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            print(f"{name}: wrote {path.relative_to(REPO)} ({len(lines)} lines)")
            continue
        if not path.is_file():
            print(f"{name}: no digest list {path.relative_to(REPO)}", file=sys.stderr)
            return 2
        want = path.read_text(encoding="utf-8").splitlines()
        if want == lines:
            print(f"{name}: no differences ({len(lines)} lines of {path.relative_to(REPO)})")
            continue
        different += 1
        import difflib  # noqa: PLC0415

        diff = list(difflib.unified_diff(want, lines, "recorded", "this run", n=0, lineterm=""))
        print(f"{name}: {sum(1 for d in diff[2:] if d.startswith('+'))} lines differ from {path.relative_to(REPO)}:")
        print("\n".join(diff[:200]) + ("\n..." if len(diff) > 200 else ""))
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
