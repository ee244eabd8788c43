"""The build's RUSTC_WRAPPER (build_backend/rustc_wrapper.py, written by rust.py): the workspace's own crates,
and only they, get the workspace's path maps; every crate runs through the compiler cache (or the user's own
RUSTC_WRAPPER); and under a cache every crate, the registry's and the workspace's (built from a copy at a path
of its own, cargo_workspace.py), gets a command line that is the same from two checkouts, so that the cache
hits it from anywhere (sccache hashes rustc's arguments, less --out-dir, -L and --extern, with its working
directory and its CARGO_ variables)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from build_backend import cargo_workspace, rust, rustc_wrapper
from build_backend.paths import BUILD_PREFIX, SOURCE_PREFIX, Layout, make_layout
from buildcore.settings import Settings, load
from buildcore.toolchain import Toolchain, launcher

ROOT = Path(__file__).resolve().parents[2]
# What a rustc command line names that sccache leaves out of its key (it hashes those files' contents).
UNHASHED = ("--out-dir", "-L", "--extern")

# A launcher that records its arguments and the variables that matter, one file per call, then runs them.
RECORDER = """#!/bin/sh
f=$(mktemp "{calls}/call.XXXXXX")
{{ echo "cwd=$(pwd)"; env | grep -E '^(CARGO_|OUT_DIR=)' | grep -v '^CARGO_MAKEFLAGS=' | sort; echo "--"
   for a in "$@"; do echo "$a"; done; }} > "$f"
exec "$@"
"""


def recorder(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "calls"
    calls.mkdir(parents=True)
    exe = tmp_path / "bin" / "recorder"
    exe.parent.mkdir()
    exe.write_text(RECORDER.format(calls=calls))
    exe.chmod(0o755)
    return exe, calls


@dataclass(frozen=True)
class Call:
    cwd: str
    env: tuple[str, ...]
    argv: tuple[str, ...]  # what the launcher got: rustc, then its arguments

    @property
    def manifest_dir(self) -> str:
        return next((e.split("=", 1)[1] for e in self.env if e.startswith("CARGO_MANIFEST_DIR=")), "")

    @property
    def crate(self) -> str:
        argv = list(self.argv)
        return argv[argv.index("--crate-name") + 1] if "--crate-name" in argv else ""

    def key(self) -> tuple[str, ...]:
        """The arguments as sccache hashes them (rustc's own path aside)."""
        out, skip = [], False
        for a in self.argv[1:]:
            if skip:
                skip = False
            elif a in UNHASHED:
                skip = True
            else:
                out.append(a)
        return tuple(out)


def read_calls(calls: Path) -> list[Call]:
    out = []
    for f in sorted(calls.iterdir()):
        head, _, args = f.read_text().partition("--\n")
        lines = head.splitlines()
        out.append(Call(lines[0].removeprefix("cwd="), tuple(lines[1:]), tuple(args.splitlines())))
    return out


# --- the script alone --------------------------------------------------------------------------------------


def run_wrapper(wrapper: Path, manifest_dir: str | None, *args: str, **env_vars: str) -> list[str]:
    """The arguments the launcher got, after the OUT_DIR it saw."""
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO_MANIFEST_DIR", "OUT_DIR")}
    if manifest_dir is not None:
        env["CARGO_MANIFEST_DIR"] = manifest_dir
    env.update(env_vars)
    out = subprocess.run([os.fspath(wrapper), *args], env=env, capture_output=True, text=True, check=True).stdout
    return out.split("\0")[:-1]


@pytest.fixture
def echo(tmp_path: Path) -> Path:
    """Stands for the launcher (or rustc): prints OUT_DIR and its arguments, NUL-separated."""
    exe = tmp_path / "echo-args"
    exe.write_text('#!/bin/sh\nprintf \'%s\\0\' "${OUT_DIR-}" "$@"\n')
    exe.chmod(0o755)
    return exe


def test_only_the_workspaces_crates_get_its_flags(tmp_path: Path, echo: Path) -> None:
    source = tmp_path / "it's a checkout" / "src"  # a quote and a space survive the shell
    cargo_home = source / ".cargo"  # inside the checkout: its crates are still the registry's
    flags = [f"--remap-path-prefix={source}=/s", "--cfg=x y"]
    wrapper = rustc_wrapper.write(
        tmp_path, workspace=source, registry=cargo_home, workspace_flags=flags, out_dirs=None, launcher=os.fspath(echo)
    )
    assert wrapper == tmp_path / rustc_wrapper.WRAPPER_NAME and os.access(wrapper, os.X_OK)
    rustc = ["/opt/rust/bin/rustc", "--crate-name", "k", "src/lib.rs"]
    assert run_wrapper(wrapper, str(source / "rust" / "runtime"), *rustc) == ["", *rustc, *flags]
    assert run_wrapper(wrapper, str(source), *rustc) == ["", *rustc, *flags]
    for other in (str(cargo_home / "registry" / "src" / "syn-2"), f"{source}2/crate", "/elsewhere", "", None):
        assert run_wrapper(wrapper, other, *rustc) == ["", *rustc], other  # unchanged, through the launcher
    # No launcher: the command runs itself.
    direct = rustc_wrapper.write(
        tmp_path, workspace=source, registry=cargo_home, workspace_flags=flags, out_dirs=None, launcher=None
    )
    assert run_wrapper(direct, str(source / "rust"), os.fspath(echo), "-vV") == ["", "-vV", *flags]
    assert run_wrapper(direct, None, os.fspath(echo), "-vV") == ["", "-vV"]


def test_a_registry_crates_out_dir_moves_to_a_copy_named_by_its_contents(tmp_path: Path, echo: Path) -> None:
    """Two build directories' OUT_DIRs with the same files: one copy, the same path, for both; other
    contents: another copy; the checkout's crates keep theirs; no copy possible: OUT_DIR is left."""
    cargo_home, store = tmp_path / "cargo", tmp_path / "cache" / "out-dirs"
    registry_crate = str(cargo_home / "registry" / "src" / "pyo3-build-config-0.26.0")
    wrapper = rustc_wrapper.write(
        tmp_path,
        workspace=tmp_path / "src",
        registry=cargo_home,
        workspace_flags=[],
        out_dirs=store,
        launcher=os.fspath(echo),
    )
    seen = []
    for build in ("build-a", "build-b", "build-c"):
        out_dir = tmp_path / build / "cargo" / "release" / "build" / "pyo3-build-config-1234" / "out"
        (out_dir / "sub").mkdir(parents=True)
        (out_dir / "pyo3-build-config.txt").write_text("implementation=CPython\n")
        os.utime(out_dir / "pyo3-build-config.txt", (1_600_000_000, 1_600_000_000))  # the build script's time
        (out_dir / "sub" / "more.rs").write_text("pub const X: u8 = 1;\n" if build != "build-c" else "// other\n")
        got = run_wrapper(wrapper, registry_crate, "rustc", OUT_DIR=str(out_dir), CARGO_PKG_NAME="pyo3-build-config")
        seen.append(Path(got[0]))
        assert got[1:] == ["rustc"]
    assert seen[0] == seen[1] != seen[2], seen
    for copy in seen:
        assert copy.parent == store and copy.name.startswith("pyo3-build-config-")
        assert (copy / "pyo3-build-config.txt").read_text() == "implementation=CPython\n"
        assert (copy / "pyo3-build-config.txt").stat().st_mtime == 1_600_000_000  # or cargo rebuilds next time
    assert sorted(p.name for p in store.iterdir()) == sorted({p.name for p in seen})  # nothing half-made left
    # A workspace crate's OUT_DIR moves too (the build directory's path stays out of its command line).
    member_out = tmp_path / "build-a" / "cargo" / "release" / "build" / "rocm_compat-1" / "out"
    member_out.mkdir(parents=True)
    (member_out / "libshim.a").write_bytes(b"!<arch>\n")
    moved = run_wrapper(wrapper, str(tmp_path / "src" / "rust"), "rustc", OUT_DIR=str(member_out), CARGO_PKG_NAME="rc")
    assert Path(moved[0]).parent == store and Path(moved[0]).name.startswith("rc-"), moved
    assert (Path(moved[0]) / "libshim.a").read_bytes() == b"!<arch>\n" and moved[1:] == ["rustc"]
    assert run_wrapper(wrapper, registry_crate, "rustc", OUT_DIR=str(tmp_path / "none"))[0] == str(tmp_path / "none")
    # A copy that is not what its name says (changed by hand): OUT_DIR is left as it is.
    (seen[2] / "sub" / "more.rs").write_text("// changed\n")
    other_out = tmp_path / "build-c" / "cargo" / "release" / "build" / "pyo3-build-config-1234" / "out"
    again = run_wrapper(wrapper, registry_crate, "rustc", OUT_DIR=str(other_out), CARGO_PKG_NAME="pyo3-build-config")
    assert again[0] == str(other_out)
    blocked = rustc_wrapper.write(
        tmp_path,
        workspace=tmp_path / "src",
        registry=cargo_home,
        workspace_flags=[],
        out_dirs=tmp_path / "file" / "x",
        launcher=os.fspath(echo),
    )
    (tmp_path / "file").write_text("not a directory")
    assert run_wrapper(blocked, registry_crate, "rustc", OUT_DIR=str(member_out))[0] == str(member_out)


def test_a_workspace_crate_whose_out_dir_stays_gets_the_build_directorys_map(tmp_path: Path, echo: Path) -> None:
    """The build directory's map goes only to a workspace crate that compiles against an OUT_DIR there (no copy
    could be made), before the workspace's own maps; a crate without one, or with a copy, gets none."""
    build, source = tmp_path / "build dir", tmp_path / "src"
    out_dir = build / "cargo" / "release" / "build" / "rocm_compat-1" / "out"
    out_dir.mkdir(parents=True)
    ws_flags, build_flags = [f"--remap-path-prefix={source}=/s"], [f"--remap-path-prefix={build}=/b"]
    crate = str(source / "rust" / "rocm_compat")
    for store, expected in (
        (tmp_path / "file" / "x", [*build_flags, *ws_flags]),  # no copy possible: OUT_DIR stays in the build
        (tmp_path / "store", ws_flags),
        (None, [*build_flags, *ws_flags]),  # nothing moved
    ):
        (tmp_path / "file").write_text("not a directory")
        wrapper = rustc_wrapper.write(
            build,
            workspace=source,
            registry=tmp_path / "cargo",
            workspace_flags=ws_flags,
            build_flags=build_flags,
            out_dirs=store,
            launcher=os.fspath(echo),
        )
        assert run_wrapper(wrapper, crate, "rustc", OUT_DIR=str(out_dir))[1:] == ["rustc", *expected], store
        assert run_wrapper(wrapper, crate, "rustc")[1:] == ["rustc", *ws_flags]  # no build script
        assert run_wrapper(wrapper, str(tmp_path / "cargo" / "x"), "rustc", OUT_DIR=str(out_dir))[1:] == ["rustc"]


# --- what rust.py gives cargo ------------------------------------------------------------------------------


class Ran(Exception):
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        super().__init__("ran")
        self.args, self.env = args, env


def cargo_setup(
    monkeypatch: pytest.MonkeyPatch, layout: Layout, environ: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """maturin's command and environment from rust.build_extension (cpu), not run."""

    def fake_run(args: list[str], *, env: dict[str, str], **_: object) -> str:
        raise Ran([os.fspath(a) for a in args], dict(env))

    monkeypatch.setattr(rust, "run", fake_run)
    tc = Toolchain(platform="cpu", launchers=launcher.resolve(load(None, environ, {}), environ))
    with pytest.raises(Ran) as ran:
        rust.build_extension(tc, layout, Settings(), None, environ)
    return ran.value.args, ran.value.env


def test_cargo_gets_the_wrapper_and_no_build_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe, _ = recorder(tmp_path)
    layout = make_layout(ROOT, tmp_path / "build", "cpu")
    cargo_home = tmp_path / "cargo-home"
    environ = {
        "PATH": os.environ["PATH"],
        "CARGO_HOME": str(cargo_home),
        "RUSTC_WRAPPER": str(exe),  # the user's own: the wrapper runs it
        "RUSTFLAGS": "-C target-cpu=native",
        "CARGO_TARGET_DIR": str(tmp_path / "theirs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    args, env = cargo_setup(monkeypatch, layout, environ)
    wrapper = layout.build / rustc_wrapper.WRAPPER_NAME
    assert env["RUSTC_WRAPPER"] == str(wrapper)
    text = wrapper.read_text()
    assert f"exec {exe} " in text
    # Under a cache for rustc (the user's own here) cargo builds a copy of the workspace, in the first slot.
    slot = tmp_path / "cache" / "monarch-runtime" / cargo_workspace.SLOTS / "0"
    assert args[args.index("--manifest-path") + 1] == str(slot / "rust" / "extension" / "Cargo.toml")
    assert (slot / "rust" / "runtime" / "src" / "lib.rs").read_bytes() == (
        ROOT / "rust/runtime/src/lib.rs"
    ).read_bytes()
    for prefix, to in ((layout.build, BUILD_PREFIX), (slot, SOURCE_PREFIX), (cargo_home, "/cargo")):
        assert f"--remap-path-prefix={prefix}={to}" in text
    assert str(layout.source) not in text
    store = tmp_path / "cache" / "monarch-runtime" / rust.OUT_DIRS
    assert f"mkdir -p {store} " in text  # where the registry crates' OUT_DIRs go
    # Every crate: the user's flags, and the maps of CARGO_HOME and of those copies; nothing of the checkout
    # or the build directory.
    assert env["CARGO_ENCODED_RUSTFLAGS"].split("\x1f") == [
        "-C",
        "target-cpu=native",
        f"--remap-path-prefix={cargo_home}=/cargo",
        f"--remap-path-prefix={store}={rust.OUT_DIRS_PREFIX}",
    ]
    # The target directory is an argument: CARGO_ variables are in sccache's key.
    assert "CARGO_TARGET_DIR" not in env and "RUSTFLAGS" not in env
    assert args[args.index("--target-dir") + 1] == str(layout.build / "cargo")


def test_no_shared_out_dir_where_pyo3_writes_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo: Path
) -> None:
    """Cross-compiling, or under pyo3's PYO3_CROSS* variables, pyo3's build script writes into the OUT_DIR of
    pyo3-build-config: the registry crates keep their own OUT_DIR then; otherwise it moves to a copy."""
    cargo_home = tmp_path / "cargo-home"
    registry_crate = str(cargo_home / "registry" / "src" / "pyo3-build-config-0.26.0")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "pyo3-build-config.txt").write_text("implementation=CPython\n")
    store = tmp_path / "cache" / "monarch-runtime" / rust.OUT_DIRS
    for extra in (
        {"PYO3_CROSS_PYTHON_VERSION": "3.9"},
        {"PYO3_CROSS": "1"},
        {"CARGO_BUILD_TARGET": "aarch64-unknown-linux-gnu"},
        {},
    ):
        layout = make_layout(ROOT, tmp_path / "build", "cpu")
        environ = {"PATH": os.environ["PATH"], "CARGO_HOME": str(cargo_home), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        _, env = cargo_setup(monkeypatch, layout, {**environ, **extra})
        seen = Path(run_wrapper(Path(env["RUSTC_WRAPPER"]), registry_crate, os.fspath(echo), OUT_DIR=str(out_dir))[0])
        if extra:
            assert seen == out_dir, extra
            assert not store.exists(), extra
        else:
            assert seen.parent == store and (seen / "pyo3-build-config.txt").is_file()


# --- cargo through the wrapper, from two checkouts ---------------------------------------------------------


def checkout(dest: Path) -> Path:
    """The Rust workspace of this tree, copied to ``dest``."""
    for name in ("Cargo.toml", "Cargo.lock"):
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "rust", dest / "rust", ignore=shutil.ignore_patterns("target"))
    return dest


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo not installed")
def test_every_crate_gets_the_same_command_line_from_two_checkouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cargo builds rocm_compat (two workspace crates and a build script of its own; the registry's cc, shlex,
    find-msvc-tools) with what rust.py gives it, in two checkouts at different places with build directories
    of their own, through a recording RUSTC_WRAPPER of the user's: every compile, the workspace's crates' too,
    has the same arguments (as sccache hashes them), working directory and CARGO_ variables from both, and
    none names either checkout or build directory."""
    runs: dict[str, list[Call]] = {}
    layouts: dict[str, Layout] = {}
    slot = tmp_path / "cache" / "monarch-runtime" / cargo_workspace.SLOTS / "0"
    for name, where in (("a", tmp_path / "a" / "src"), ("b", tmp_path / "elsewhere" / "deeper" / "src")):
        exe, calls = recorder(tmp_path / f"rec-{name}")
        layout = make_layout(checkout(where), tmp_path / f"build-{name}", "cpu")
        # This machine's environment (rustup's, CARGO_HOME), less what would change the crates' flags.
        drop = ("CARGO_TARGET_DIR", "CARGO_BUILD_", "CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "RUSTC_")
        environ = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        environ["RUSTC_WRAPPER"] = str(exe)
        environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # the OUT_DIR copies and the slots: one place
        environ["CARGO_INCREMENTAL"] = "0"  # as the build sets it under sccache (incremental dirs are per build)
        args, env = cargo_setup(monkeypatch, layout, environ)
        target = args[args.index("--target-dir") + 1]
        manifest = Path(args[args.index("--manifest-path") + 1])
        assert manifest.is_relative_to(slot), manifest  # synced from this checkout (the lock is let go)
        cargo = ["cargo", "build", "--quiet", "-p", "rocm_compat", "--manifest-path", str(slot / "Cargo.toml")]
        proc = subprocess.run(
            [*cargo, "--target-dir", target], env=env, cwd=layout.build, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        # The crates' compiles (cargo's probes, rustc -vV and --print, name no manifest directory).
        runs[name], layouts[name] = [c for c in read_calls(calls) if c.manifest_dir], layout
    cargo_home = Path(env.get("CARGO_HOME", Path.home() / ".cargo"))
    store = tmp_path / "cache" / "monarch-runtime" / rust.OUT_DIRS
    common = (f"--remap-path-prefix={cargo_home}=/cargo", f"--remap-path-prefix={store}={rust.OUT_DIRS_PREFIX}")
    for name, calls in runs.items():
        source, build = str(layouts[name].source), str(layouts[name].build)
        members = [c for c in calls if is_member(c, str(slot))]
        registry = [c for c in calls if not is_member(c, str(slot))]
        assert {"rocm_compat", "host_collectives", "build_script_build"} <= {c.crate for c in members}
        assert {"cc", "shlex"} <= {c.crate for c in registry}
        for c in members:  # the workspace's map, then the common ones, last; no build directory's
            assert c.argv[-3:] == (f"--remap-path-prefix={slot}={SOURCE_PREFIX}", *common), c.argv
            assert c.cwd == str(slot), c.cwd
        for c in registry:  # the common maps alone
            assert tuple(a for a in c.argv if a.startswith("--remap-path-prefix=")) == common, c.argv
        for c in calls:  # no path of the checkout or its build directory in what sccache hashes
            assert not [a for a in (*c.key(), c.cwd, *c.env) if source in a or build in a], c
    a, b = ({(c.crate, c.manifest_dir): c for c in runs[n]} for n in "ab")
    assert a.keys() == b.keys()
    for crate, call in a.items():
        assert (call.key(), call.cwd, call.env) == (b[crate].key(), b[crate].cwd, b[crate].env), crate


def is_member(call: Call, source: str) -> bool:
    return call.manifest_dir == source or call.manifest_dir.startswith(source + os.sep)
