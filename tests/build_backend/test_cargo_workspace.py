"""The workspace cargo builds under a compiler cache (build_backend/cargo_workspace.py): a copy in the first free
slot of a per-user directory, synced with the checkout file by file with its modification times, so that cargo
decides what is fresh as it would in the checkout; the checkout itself without a cache or without a slot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build_backend import cargo_workspace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def checkout(dest: Path) -> Path:
    """The Rust workspace of this tree, copied to ``dest`` (times kept)."""
    dest.mkdir(parents=True)
    for name in cargo_workspace.WORKSPACE_FILES:
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "rust", dest / "rust", ignore=shutil.ignore_patterns("target"))
    return dest


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file cargo would see, with its contents and modification time."""
    return {
        rel.as_posix(): ((root / rel).read_bytes(), (root / rel).stat().st_mtime_ns)
        for rel in cargo_workspace.sources(root)
    }


def test_the_copy_is_the_checkout_with_its_times(tmp_path: Path) -> None:
    source = checkout(tmp_path / "src")
    store = tmp_path / "store"
    with cargo_workspace.workspace(source, store) as root:
        assert root == store / "0"
        assert tree(root) == tree(source)
        assert "rust/runtime/src/lib.rs" in tree(root) and "Cargo.lock" in tree(root)
    # The checkout changes: an edit, a new file, a removed one, a cargo target directory, no Cargo.lock.
    lib = source / "rust" / "host_collectives" / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n// edited\n")
    (source / "rust" / "runtime" / "src" / "new.rs").write_text("// new\n")
    (source / "rust" / "rocm_compat" / "build.rs").unlink()
    target = source / "rust" / "runtime" / "target"
    target.mkdir()
    (target / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (target / "big.rlib").write_bytes(b"x")
    (source / "Cargo.lock").unlink()
    (store / "0" / "rust" / "stray.txt").write_text("another checkout's file\n")
    # Where this checkout has a directory the slot has a file, and the other way round.
    (source / "rust" / "runtime" / "src" / "gpu.rs").unlink()
    (source / "rust" / "runtime" / "src" / "gpu.rs").mkdir()
    (source / "rust" / "runtime" / "src" / "gpu.rs" / "mod.rs").write_text("// a module directory now\n")
    shutil.rmtree(source / "rust" / "rocm_compat" / "shim" / "generated")
    (source / "rust" / "rocm_compat" / "shim" / "generated").write_text("a file now\n")
    with cargo_workspace.workspace(source, store) as root:
        assert tree(root) == tree(source)
        assert not (root / "rust" / "rocm_compat" / "build.rs").exists()
        assert not (root / "rust" / "runtime" / "target").exists() and not (root / "rust" / "stray.txt").exists()
        assert not (root / "Cargo.lock").exists()
        # Directories carry the checkout's times too (cargo's rerun-if-changed on a directory).
        assert (root / "rust" / "rocm_compat" / "shim").stat().st_mtime_ns == (
            source / "rust" / "rocm_compat" / "shim"
        ).stat().st_mtime_ns


def test_builds_at_the_same_time_take_other_slots(tmp_path: Path) -> None:
    a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
    store = tmp_path / "store"
    with cargo_workspace.workspace(a, store) as first:
        with cargo_workspace.workspace(b, store) as second:
            assert (first, second) == (store / "0", store / "1")
        # Held by another process: the lock is an flock on the slot's file.
        proc = subprocess.run(
            [sys.executable, "-c", HOLDS, str(store / "0.lock")], capture_output=True, text=True, check=False
        )
        assert proc.stdout.strip() == "busy", proc.stderr
    with cargo_workspace.workspace(b, store) as again:
        assert again == store / "0" and tree(again) == tree(b)


HOLDS = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("busy")
"""


def test_without_a_store_or_a_slot_the_checkout_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = checkout(tmp_path / "src")
    with cargo_workspace.workspace(source, None) as root:
        assert root == source
    assert capsys.readouterr().err == ""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n")
    with cargo_workspace.workspace(source, blocked / "slots") as root:
        assert root == source
    err = capsys.readouterr().err
    assert "building the workspace in the checkout" in err and str(blocked / "slots") in err, err
    assert "miss the compiler cache" in err


def test_a_lock_file_cargo_wrote_goes_back_to_the_checkout(tmp_path: Path) -> None:
    source = checkout(tmp_path / "src")
    with cargo_workspace.workspace(source, tmp_path / "store") as root:
        (root / "Cargo.lock").write_text("# updated by cargo\n")
    assert (source / "Cargo.lock").read_text() == "# updated by cargo\n"
    before = (source / "Cargo.lock").stat().st_mtime_ns
    with cargo_workspace.workspace(source, tmp_path / "store"):
        pass  # unchanged: not rewritten
    assert (source / "Cargo.lock").stat().st_mtime_ns == before
    with pytest.raises(RuntimeError), cargo_workspace.workspace(source, tmp_path / "store") as root:
        (root / "Cargo.lock").write_text("# a failed build's\n")
        raise RuntimeError("cargo failed")
    assert (source / "Cargo.lock").read_text() == "# updated by cargo\n"


def test_every_crate_the_workspace_builds_lies_in_the_copy() -> None:
    """Only Cargo.toml, Cargo.lock and rust/ are copied: every member and every path dependency must be under
    rust/ (a crate elsewhere would be missing from the copy)."""
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    members = [ROOT / m for m in workspace["workspace"]["members"]]
    assert members
    seen = set()
    while members:
        crate = members.pop().resolve()
        if crate in seen:
            continue
        seen.add(crate)
        assert crate.is_relative_to(ROOT / cargo_workspace.WORKSPACE_DIR), crate
        manifest = tomllib.loads((crate / "Cargo.toml").read_text())
        for table in ("dependencies", "build-dependencies", "dev-dependencies"):
            for dep in manifest.get(table, {}).values():
                if isinstance(dep, dict) and "path" in dep:
                    members.append(crate / dep["path"])
    assert {p.name for p in seen} >= {"extension", "runtime", "rocm_compat", "host_collectives"}


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo not installed")
def test_cargo_rebuilds_from_the_copy_exactly_what_changed_in_the_checkout(tmp_path: Path) -> None:
    """Two checkouts with different contents take turns in slot 0, each with its own target directory: cargo
    finds each one's build fresh when its checkout is unchanged (though the other's was in the slot in between),
    and rebuilds after an edit in the checkout."""
    a, b = checkout(tmp_path / "a"), checkout(tmp_path / "b")
    lib = Path("rust") / "host_collectives" / "src" / "lib.rs"
    (b / lib).write_text((b / lib).read_text() + '\npub const CHECKOUT: &str = "b";\n')
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO_TARGET_DIR", "CARGO_BUILD_", "RUSTC_"))}

    def build(source: Path) -> str:
        with cargo_workspace.workspace(source, store) as root:
            assert root == store / "0"
            manifest, target = str(root / "Cargo.toml"), str(source / "target")
            proc = subprocess.run(
                ["cargo", "build", "-v", "-p", "host_collectives", "--manifest-path", manifest, "--target-dir", target],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stderr

    assert "Compiling host_collectives" in build(a)
    assert "Compiling host_collectives" in build(b)
    assert "Fresh host_collectives" in build(a)
    assert "Fresh host_collectives" in build(b)
    (a / lib).write_text((a / lib).read_text() + '\npub const CHECKOUT: &str = "a";\n')
    assert "Compiling host_collectives" in build(a)
    assert "Fresh host_collectives" in build(b)
    rlib = sorted((a / "target" / "debug" / "deps").glob("libhost_collectives-*.rlib"))
    assert rlib and any(b"CHECKOUT" in p.read_bytes() for p in rlib)  # a's edit is what was compiled
