"""Parse and check ``ci/matrix.toml``, expand it into rows.

A row is one flavour on one arch (the wheels are abi3: one wheel serves every python); its
``pythons`` are the interpreters its wheel is test-imported on.
"""

from __future__ import annotations

import fnmatch
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from ci.errors import CIError

CI_DIR = Path(__file__).resolve().parent
REPO_ROOT = CI_DIR.parent
DEFAULT_MATRIX = CI_DIR / "matrix.toml"
SCHEMA = 1
INSTALL_KINDS = ("none", "pypi", "apt", "root")
PLATFORMS = ("cpu", "cuda", "rocm")
ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Exclusion:
    patterns: Mapping[str, str]
    reason: str

    def matches(self, values: Mapping[str, str]) -> bool:
        return all(fnmatch.fnmatchcase(values[k], p) for k, p in self.patterns.items())


@dataclass(frozen=True)
class Toolchain:
    name: str
    description: str
    commands: tuple[str, ...]
    probe: tuple[str, ...]
    env: Mapping[str, str]
    install: Mapping[str, Any]

    @property
    def is_root(self) -> bool:
        """Built and tested inside a Debian root made by ci/rocm-root.sh (install.kind = "root")."""
        return self.install.get("kind") == "root"

    @property
    def root_version(self) -> str:
        return str(self.install.get("version", ""))

    @property
    def root_python(self) -> str:
        """The MAJOR.MINOR of the root's own python3, which builds and tests a root row's wheel."""
        return str(self.install.get("python", ""))

    def root_dir(self, toolchains_dir: Path) -> Path:
        """Where the root lives: {toolchains}/roots/rocm<version> (as ci/install-toolchains.sh makes it)."""
        return toolchains_dir / "roots" / f"rocm{self.root_version}"


@dataclass(frozen=True)
class Flavour:
    name: str
    platform: str
    local_version: str
    toolkit: str
    toolchain: str
    archs: tuple[str, ...]
    collective: str | None
    image: Mapping[str, str]  # arch -> container image; empty for a root flavour (runs on the runner itself)
    bootstrap: str
    repair: tuple[str, ...]
    validate: tuple[str, ...]
    size_budget_mib: float
    needed: tuple[str, ...]
    external_libs: tuple[str, ...]
    undefined: tuple[str, ...]
    glibc_max: tuple[int, int]  # the newest GLIBC_x.y symbol version (and manylinux_x_y tag) allowed
    glibcxx_max: tuple[int, int, int]  # the newest GLIBCXX_3.4.z symbol version allowed
    in_root: bool = False  # its toolchain is a ci/rocm-root.sh root: built, and tested, inside it


@dataclass(frozen=True)
class Row:
    flavour: Flavour
    arch: str
    pythons: tuple[str, ...]
    skipped_pythons: tuple[tuple[str, str], ...]  # (python, reason)

    @property
    def name(self) -> str:
        return f"{self.flavour.name}-{self.arch}"

    @property
    def in_root(self) -> bool:
        """A root row: built with, and tested on, the root's own python (not the python axis)."""
        return self.flavour.in_root


@dataclass(frozen=True)
class Action:
    key: str
    uses: str
    sha: str
    tag: str

    @property
    def ref(self) -> str:
        return f"{self.uses}@{self.sha}"


@dataclass(frozen=True)
class Matrix:
    path: Path
    pythons: tuple[str, ...]
    arches: tuple[str, ...]
    flavours: Mapping[str, Flavour]
    toolchains: Mapping[str, Toolchain]
    exclusions: tuple[Exclusion, ...]
    build_python: str
    driver_python: str
    package: str
    version: str
    runners: Mapping[str, str]
    bootstraps: Mapping[str, str]
    workflow_file: str
    compiler_cache: str
    compiler_cache_size: str
    tools: tuple[str, ...]
    rust_toolchain: str
    timeout_minutes: int
    actions: Mapping[str, Action]
    rows: tuple[Row, ...] = field(default=())
    excluded_rows: tuple[tuple[str, str], ...] = field(default=())  # (row name, reason)

    def row(self, name: str) -> Row:
        """Find a row by its name; a bare flavour name means that flavour on this machine's arch."""
        by_name = {r.name: r for r in self.rows}
        if name in by_name:
            return by_name[name]
        if name in self.flavours:
            candidate = f"{name}-{host_arch()}"
            if candidate in by_name:
                return by_name[candidate]
        for excluded, reason in self.excluded_rows:
            if excluded in (name, f"{name}-{host_arch()}"):
                raise CIError(f"row {excluded!r} is excluded in {self.path.name}: {reason}.")
        raise CIError(
            f"unknown row {name!r}. Rows declared in {self.path.name}: {', '.join(sorted(by_name))} "
            "(a bare flavour name means that flavour on this machine's arch)."
        )


def host_arch() -> str:
    machine = platform.machine()
    return ARCH_ALIASES.get(machine, machine)


def default_toolchains_dir() -> Path:
    env = os.environ.get("MONARCH_TOOLCHAINS")
    return Path(env) if env else Path.home() / ".cache" / "monarch-runtime" / "toolchains"


def _err(path: Path, where: str, what: str) -> CIError:
    return CIError(f"{path}: {where}: {what}")


def _table(path: Path, data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise _err(path, where, f"missing table [{key}]")
    return value


def _str(path: Path, data: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise _err(path, where, f"{key!r} must be a string")
    return value


def _strs(path: Path, data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _err(path, where, f"{key!r} must be a list of strings")
    return tuple(value)


def _str_map(path: Path, data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = data.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _err(path, where, f"{key!r} must be a table of strings")
    return dict(value)


def _version(path: Path, data: Mapping[str, Any], key: str, where: str, *, parts: int, example: str) -> tuple[int, ...]:
    value = data.get(key)
    numbers = value.split(".") if isinstance(value, str) else []
    if len(numbers) != parts or not all(n.isdigit() for n in numbers):
        raise _err(path, where, f"{key!r} must be a version like {example!r}, not {value!r}")
    return tuple(int(n) for n in numbers)


def _root_install(
    path: Path, install: Mapping[str, Any], probe: Sequence[str], env: Mapping[str, str], where: str
) -> None:
    """install = { kind = "root", version = "X.Y", python = "X.Y" }: a root made by ci/rocm-root.sh."""
    _version(path, install, "version", f"{where}.install", parts=2, example="7.2")
    version = str(install["version"])
    _version(path, install, "python", f"{where}.install", parts=2, example="3.14")
    stamp = f"{{toolchains}}/roots/rocm{version}/.monarch-root"
    if stamp not in probe:
        raise _err(
            path,
            where,
            f"a root toolchain's probe must list the root's stamp {stamp!r} (ci/rocm-root.sh writes it last, "
            "so it says the root is finished)",
        )
    inside = [k for k, v in env.items() if "{toolchains}" in v]
    if inside:
        raise _err(
            path,
            where,
            f"env {', '.join(inside)} uses {{toolchains}}, but a root toolchain's env applies inside the root: "
            'give paths as the root sees them (e.g. ROCM_HOME = "/usr")',
        )


def _pair(v: tuple[int, ...]) -> tuple[int, int]:
    return (v[0], v[1])


def _triple(v: tuple[int, ...]) -> tuple[int, int, int]:
    return (v[0], v[1], v[2])


def _images(path: Path, data: Mapping[str, Any], where: str, arches: Sequence[str]) -> dict[str, str]:
    value = data.get("image")
    if isinstance(value, str):
        return {arch: value.replace("{arch}", arch) for arch in arches}
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    raise _err(path, where, "'image' must be a string or a table arch -> image")


def _unique(path: Path, values: Sequence[str], where: str) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise _err(path, where, f"{v!r} is listed twice")
        seen.add(v)


def load(path: Path | None = None) -> Matrix:
    """Load and check a matrix file; every problem is a CIError naming the file and key."""
    path = path or DEFAULT_MATRIX
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CIError(f"matrix file {path} does not exist.") from None
    except tomllib.TOMLDecodeError as err:
        raise CIError(f"{path} is not valid TOML: {err}.") from None
    return parse(data, path)


def parse(data: Mapping[str, Any], path: Path) -> Matrix:
    if data.get("schema") != SCHEMA:
        raise _err(path, "schema", f"expected schema = {SCHEMA}, found {data.get('schema')!r}")
    axes = _table(path, data, "axes", "top level")
    pythons = _strs(path, axes, "python", "[axes]")
    flavour_names = _strs(path, axes, "flavour", "[axes]")
    arches = _strs(path, axes, "arch", "[axes]")
    for axis, values in (("python", pythons), ("flavour", flavour_names), ("arch", arches)):
        if not values:
            raise _err(path, "[axes]", f"axis {axis!r} is empty")
        _unique(path, values, f"[axes].{axis}")
    for py in pythons:
        parts = py.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise _err(path, "[axes].python", f"{py!r} is not a MAJOR.MINOR version")

    build = _table(path, data, "build", "top level")
    build_python = _str(path, build, "python", "[build]")
    if build_python not in pythons:
        raise _err(path, "[build].python", f"{build_python!r} is not on the python axis")
    if build_python != min(pythons, key=lambda v: tuple(int(x) for x in v.split("."))):
        raise _err(path, "[build].python", "must be the oldest python of the axis (abi3 is built with the minimum)")
    runners = _str_map(path, build, "runners", "[build]")
    for arch in arches:
        if arch not in runners:
            raise _err(path, "[build].runners", f"no runner for arch {arch!r}")

    toolchains: dict[str, Toolchain] = {}
    for name, tc in _table(path, data, "toolchain", "top level").items():
        where = f"[toolchain.{name}]"
        if not isinstance(tc, dict):
            raise _err(path, where, "must be a table")
        install = tc.get("install", {"kind": "none"})
        if not isinstance(install, dict) or install.get("kind") not in INSTALL_KINDS:
            raise _err(path, where, f"install.kind must be one of {', '.join(INSTALL_KINDS)}")
        probe = _strs(path, tc, "probe", where)
        env = _str_map(path, tc, "env", where)
        if install.get("kind") == "root":
            _root_install(path, install, probe, env, where)
        toolchains[name] = Toolchain(
            name=name,
            description=_str(path, tc, "description", where),
            commands=_strs(path, tc, "commands", where),
            probe=probe,
            env=env,
            install=install,
        )

    bootstraps = _str_map(path, data, "bootstrap", "top level")
    flavour_tables = _table(path, data, "flavour", "top level")
    flavours: dict[str, Flavour] = {}
    for name in flavour_names:
        where = f"[flavour.{name!r}]" if "." in name else f"[flavour.{name}]"
        fl = flavour_tables.get(name)
        if not isinstance(fl, dict):
            raise _err(path, "[axes].flavour", f"flavour {name!r} has no [flavour] table")
        plat = _str(path, fl, "platform", where)
        if plat not in PLATFORMS:
            raise _err(path, where, f"platform must be one of {', '.join(PLATFORMS)}, not {plat!r}")
        toolchain = _str(path, fl, "toolchain", where)
        if toolchain not in toolchains:
            raise _err(path, where, f"toolchain {toolchain!r} is not declared under [toolchain]")
        in_root = toolchains[toolchain].is_root
        bootstrap = _str(path, fl, "bootstrap", where)
        if bootstrap not in bootstraps:
            raise _err(path, where, f"bootstrap {bootstrap!r} is not declared under [bootstrap]")
        if in_root and "image" in fl:
            raise _err(
                path,
                where,
                f'toolchain {toolchain!r} is a root (install.kind = "root"): the row runs on the runner itself, '
                "building and testing inside the root that ci/rocm-root.sh makes there, not in a container; "
                "remove 'image'",
            )
        archs = _strs(path, fl, "archs", where)
        if plat != "cpu" and not archs:
            raise _err(path, where, "a GPU flavour needs default archs")
        budget = fl.get("size_budget_mib")
        if not isinstance(budget, (int, float)) or budget <= 0:
            raise _err(path, where, "size_budget_mib must be a positive number")
        collective = _str(path, fl, "collective", where, "")
        flavours[name] = Flavour(
            name=name,
            platform=plat,
            local_version=_str(path, fl, "local_version", where),
            toolkit=_str(path, fl, "toolkit", where),
            toolchain=toolchain,
            archs=archs,
            collective=collective or None,
            image={} if in_root else _images(path, fl, where, arches),
            bootstrap=bootstrap,
            repair=_strs(path, fl, "repair", where),
            validate=_strs(path, fl, "validate", where),
            size_budget_mib=float(budget),
            needed=_strs(path, fl, "needed", where),
            external_libs=_strs(path, fl, "external_libs", where),
            undefined=_strs(path, fl, "undefined", where),
            glibc_max=_pair(_version(path, fl, "glibc_max", where, parts=2, example="2.34")),
            glibcxx_max=_triple(_version(path, fl, "glibcxx_max", where, parts=3, example="3.4.29")),
            in_root=in_root,
        )
    extra = set(flavour_tables) - set(flavour_names)
    if extra:
        raise _err(path, "[flavour]", f"{', '.join(sorted(extra))} not on the flavour axis")

    exclusions: list[Exclusion] = []
    raw_excl = data.get("exclude", [])
    if not isinstance(raw_excl, list):
        raise _err(path, "[[exclude]]", "must be an array of tables")
    for i, ex in enumerate(raw_excl):
        where = f"[[exclude]] #{i + 1}"
        if not isinstance(ex, dict):
            raise _err(path, where, "must be a table")
        reason = _str(path, ex, "reason", where, "")
        if not reason:
            raise _err(path, where, "every exclusion needs a reason")
        patterns = {k: v for k, v in ex.items() if k != "reason"}
        if not patterns:
            raise _err(path, where, "an exclusion must name at least one axis")
        for k, v in patterns.items():
            if k not in ("python", "flavour", "arch"):
                raise _err(path, where, f"unknown axis {k!r} (axes: python, flavour, arch)")
            if not isinstance(v, str):
                raise _err(path, where, f"{k!r} must be a string (a glob)")
            axis_values = {"python": pythons, "flavour": flavour_names, "arch": arches}[k]
            if not any(fnmatch.fnmatchcase(a, v) for a in axis_values):
                raise _err(path, where, f"{k} = {v!r} matches nothing on the {k} axis")
        exclusions.append(Exclusion(patterns=patterns, reason=reason))

    workflow = _table(path, data, "workflow", "top level")
    actions: dict[str, Action] = {}
    for key, spec in _table(path, workflow, "actions", "[workflow]").items():
        where = f"[workflow.actions].{key}"
        if not isinstance(spec, dict):
            raise _err(path, where, "must be a table")
        sha = _str(path, spec, "sha", where)
        if len(sha) != 40 or any(c not in "0123456789abcdef" for c in sha):
            raise _err(path, where, f"sha must be a full 40-hex commit, not {sha!r}")
        actions[key] = Action(
            key=key, uses=_str(path, spec, "uses", where), sha=sha, tag=_str(path, spec, "tag", where)
        )
    for needed in ("checkout", "setup-python", "cache", "upload-artifact", "download-artifact"):
        if needed not in actions:
            raise _err(path, "[workflow.actions]", f"missing action {needed!r}")
    timeout = workflow.get("timeout_minutes", 60)
    if not isinstance(timeout, int) or timeout <= 0:
        raise _err(path, "[workflow]", "timeout_minutes must be a positive integer")

    rows: list[Row] = []
    excluded_rows: list[tuple[str, str]] = []
    for fname in flavour_names:
        for arch in arches:
            row_values = {"flavour": fname, "arch": arch}
            row_excl = [e for e in exclusions if "python" not in e.patterns and e.matches(row_values)]
            if row_excl:
                excluded_rows.append((f"{fname}-{arch}", row_excl[0].reason))
                continue
            fl = flavours[fname]
            if fl.in_root:
                # The root's own python builds (its /opt/monarch/venv) and tests (a fresh venv) the wheel:
                # the python axis applies to the rows built on the machine itself.
                root_py = toolchains[fl.toolchain].root_python
                rows.append(Row(flavour=fl, arch=arch, pythons=(root_py,), skipped_pythons=()))
                continue
            kept: list[str] = []
            skipped: list[tuple[str, str]] = []
            for py in pythons:
                combo = {**row_values, "python": py}
                hit = [e for e in exclusions if "python" in e.patterns and e.matches(combo)]
                if hit:
                    skipped.append((py, hit[0].reason))
                else:
                    kept.append(py)
            if build_python not in kept:
                raise _err(path, "[[exclude]]", f"row {fname}-{arch} excludes the build python {build_python}")
            rows.append(Row(flavour=flavours[fname], arch=arch, pythons=tuple(kept), skipped_pythons=tuple(skipped)))

    return Matrix(
        path=path,
        pythons=pythons,
        arches=arches,
        flavours=flavours,
        toolchains=toolchains,
        exclusions=tuple(exclusions),
        build_python=build_python,
        driver_python=_str(path, build, "driver_python", "[build]"),
        package=_str(path, build, "package", "[build]"),
        version=_str(path, build, "version", "[build]"),
        runners=runners,
        bootstraps=bootstraps,
        workflow_file=_str(path, workflow, "file", "[workflow]"),
        compiler_cache=_str(path, workflow, "compiler_cache", "[workflow]"),
        compiler_cache_size=_str(path, workflow, "compiler_cache_size", "[workflow]"),
        tools=_strs(path, workflow, "tools", "[workflow]"),
        rust_toolchain=_str(path, workflow, "rust_toolchain", "[workflow]"),
        timeout_minutes=timeout,
        actions=actions,
        rows=tuple(rows),
        excluded_rows=tuple(excluded_rows),
    )
