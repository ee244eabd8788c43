"""Check a built wheel against its row: tag, auditwheel, RPATH, size, undefined symbols, build_info.

Usable on its own: ``python -m ci validate WHEEL --row ROW``. Each check returns findings; a wheel
passes when no finding failed. The import smoke test in a fresh venv lives in ci/smoke.py and is run
by ``validate`` unless ``--no-smoke``.
"""

from __future__ import annotations

import fnmatch
import io
import json
import re
import zipfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast

from ci import proc
from ci.errors import CIError
from ci.matrix import Matrix, Row

WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)
MANYLINUX_RE = re.compile(r"^manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>.+)$")
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
# Versions of symbols that the system libraries every manylinux platform provides define.
SYSTEM_SYMBOL_VERSIONS = ("GLIBC_*", "GLIBCXX_*", "CXXABI_*", "GCC_*")
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.check}: {self.detail}"


@dataclass(frozen=True)
class Expected:
    """What a row's wheel must look like (archs may be overridden like the build's -C archs)."""

    package: str
    version: str
    python_tag: str
    arch: str
    platform: str
    archs: tuple[str, ...]
    collective: str | None
    toolkit: str
    size_budget_mib: float
    needed: tuple[str, ...]
    external_libs: tuple[str, ...]
    undefined: tuple[str, ...]
    audit: tuple[str, ...]
    glibc_max: tuple[int, int] = (2, 34)
    glibcxx_max: tuple[int, int, int] = (3, 4, 29)

    @classmethod
    def for_row(cls, row: Row, matrix: Matrix, archs: Sequence[str] | None = None) -> Expected:
        fl = row.flavour
        return cls(
            package=matrix.package,
            version=f"{matrix.version}+{fl.local_version}",
            python_tag="cp" + matrix.build_python.replace(".", ""),
            arch=row.arch,
            platform=fl.platform,
            archs=tuple(archs) if archs is not None else fl.archs,
            collective=fl.collective,
            toolkit=fl.toolkit,
            size_budget_mib=fl.size_budget_mib,
            needed=fl.needed,
            external_libs=fl.external_libs,
            undefined=fl.undefined,
            audit=fl.validate,
            glibc_max=fl.glibc_max,
            glibcxx_max=fl.glibcxx_max,
        )


def _any(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def glibc_of_tag(plat: str) -> tuple[int, int] | None:
    for legacy, version in LEGACY_MANYLINUX.items():
        if plat.startswith(legacy + "_"):
            return version
    m = MANYLINUX_RE.match(plat)
    return (int(m["major"]), int(m["minor"])) if m else None


def _norm_arch(value: str) -> str:
    for prefix in ("sm_", "compute_"):
        if value.startswith(prefix):
            return value[len(prefix) :]
    return value


# --- tag and metadata ------------------------------------------------------------------------------


def check_tag(wheel: Path, exp: Expected) -> list[Finding]:
    out: list[Finding] = []
    m = WHEEL_RE.match(wheel.name)
    if not m:
        return [Finding("tag", False, f"{wheel.name} is not a wheel file name")]
    name, version, py, abi, plat = m["name"], m["version"], m["py"], m["abi"], m["plat"]
    out.append(Finding("tag", name == exp.package, f"distribution {name!r} (expected {exp.package!r})"))
    out.append(Finding("tag", version == exp.version, f"version {version!r} (expected {exp.version!r})"))
    out.append(
        Finding(
            "tag",
            (py, abi) == (exp.python_tag, "abi3"),
            f"python/abi tag {py}-{abi} (expected {exp.python_tag}-abi3: one wheel for every python)",
        )
    )
    plats = plat.split(".")  # a compressed tag set (auditwheel writes manylinux1_x.manylinux_2_5_x)
    plat_ok = all(glibc_of_tag(p) is not None and p.endswith("_" + exp.arch) for p in plats)
    out.append(Finding("tag", plat_ok, f"platform tag {plat!r} (expected manylinux_X_Y_{exp.arch})"))
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            wheel_meta = [n for n in names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1]
            if len(wheel_meta) != 1:
                out.append(Finding("tag", False, "the wheel has no (or several) *.dist-info/WHEEL"))
                return out
            text = zf.read(wheel_meta[0]).decode("utf-8")
    except zipfile.BadZipFile:
        return [*out, Finding("tag", False, f"{wheel.name} is not a zip archive")]
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    expected_tags = sorted(f"{py}-{abi}-{p}" for p in plats)
    out.append(Finding("tag", sorted(tags) == expected_tags, f"WHEEL Tag {tags} (file name says {expected_tags})"))
    purelib = [
        line.split(":", 1)[1].strip().lower() for line in text.splitlines() if line.startswith("Root-Is-Purelib:")
    ]
    out.append(Finding("tag", purelib == ["false"], f"WHEEL Root-Is-Purelib {purelib} (expected ['false'])"))
    return out


def check_size(wheel: Path, exp: Expected) -> list[Finding]:
    size_mib = wheel.stat().st_size / (1024 * 1024)
    return [
        Finding(
            "size",
            size_mib <= exp.size_budget_mib,
            f"{size_mib:.2f} MiB (budget {exp.size_budget_mib:g} MiB)",
        )
    ]


# --- auditwheel ------------------------------------------------------------------------------------


def check_auditwheel(
    wheel: Path,
    exp: Expected,
    report: Mapping[str, Any] | None = None,
    direct: Collection[str] | None = None,
    glibc_needed: tuple[int, int] | None = None,
) -> list[Finding]:
    """Run the flavour's audit command (auditwheel show --json) unless a report is given, and judge it.

    auditwheel lists every external library, transitively (libamdhip64's own libdrm, libhsa...); only
    those the wheel's ELF files need directly (``direct``, when known) must be in ``external_libs``.
    Likewise its ``sym_tag`` counts the symbol versions of those system libraries; the glibc the wheel's
    own ELF files need (``glibc_needed``, when known) is what its tag must not undercut.
    """
    if report is None:
        argv = [a.replace("{wheel}", str(wheel)) for a in exp.audit]
        if not argv:
            return [Finding("auditwheel", True, "no audit command declared for this flavour")]
        if proc.which(argv[0]) is None:
            raise CIError(
                f"{argv[0]} is not installed: install ci/requirements-test.txt "
                "(or run python -m ci with the test venv's python)."
            )
        result = proc.run(argv, capture=True, check=False)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
            return [Finding("auditwheel", False, f"{argv[0]} exited {result.returncode}: {' | '.join(tail)}")]
        try:
            report = json.loads(result.stdout)
        except json.JSONDecodeError:
            return [Finding("auditwheel", False, "its --json output is not JSON")]
    out: list[Finding] = []
    if report.get("pure"):
        out.append(Finding("auditwheel", False, "the wheel is pure Python: the native code is missing"))
    external = sorted(report.get("external_libs", {}))
    first = [lib for lib in external if direct is None or lib in direct]
    through = [lib for lib in external if lib not in first]
    unexpected = [lib for lib in first if not _any(lib, exp.external_libs)]
    detail = f"external libraries {first or 'none'}"
    if through:
        detail += f" (and, through them, {through})"
    if unexpected:
        detail += f"; NOT expected for this flavour: {unexpected}"
    out.append(Finding("auditwheel", not unexpected, detail))
    m = WHEEL_RE.match(wheel.name)
    claims = [glibc_of_tag(p) for p in m["plat"].split(".")] if m else [None]
    claimed = None if None in claims else min(c for c in claims if c is not None)
    sym_tag = str(report.get("sym_tag", ""))
    needed_glibc = glibc_needed or glibc_of_tag(sym_tag)
    source = "its own symbols" if glibc_needed else f"auditwheel: {sym_tag}"
    if claimed is None:
        out.append(
            Finding("auditwheel", False, f"the wheel is not manylinux-tagged; its symbols allow {sym_tag} (repair it)")
        )
    elif needed_glibc is None:
        out.append(Finding("auditwheel", False, f"cannot compare the tag with auditwheel's {sym_tag!r}"))
    else:
        out.append(
            Finding(
                "auditwheel",
                claimed >= needed_glibc,
                f"tag claims glibc {claimed[0]}.{claimed[1]}; it needs {needed_glibc[0]}.{needed_glibc[1]} ({source})",
            )
        )
    return out


# --- ELF: RPATH and symbols ------------------------------------------------------------------------


@dataclass(frozen=True)
class ElfInfo:
    path: str  # inside the wheel
    soname: str | None
    needed: tuple[str, ...]
    rpaths: tuple[str, ...]
    defined: frozenset[str]
    undefined: tuple[tuple[str, str | None, str | None], ...]  # (name, version, library of that version)


def _read_elf(path: str, data: bytes) -> ElfInfo:
    try:
        from elftools.elf.dynamic import DynamicSection  # noqa: PLC0415
        from elftools.elf.elffile import ELFFile  # noqa: PLC0415
        from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection  # noqa: PLC0415
        from elftools.elf.sections import SymbolTableSection  # noqa: PLC0415
    except ImportError:
        raise CIError(
            "pyelftools is not installed: install ci/requirements-test.txt "
            "(or run python -m ci with the test venv's python)."
        ) from None
    elf = ELFFile(io.BytesIO(data))
    needed: list[str] = []
    rpaths: list[str] = []
    soname = None
    dynsym = None
    versym = None
    version_names: dict[int, tuple[str, str | None]] = {}
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(cast(Any, tag).needed)
                elif tag.entry.d_tag == "DT_RPATH":
                    rpaths += cast(Any, tag).rpath.split(":")
                elif tag.entry.d_tag == "DT_RUNPATH":
                    rpaths += cast(Any, tag).runpath.split(":")
                elif tag.entry.d_tag == "DT_SONAME":
                    soname = cast(Any, tag).soname
        elif isinstance(section, SymbolTableSection) and section.name == ".dynsym":
            dynsym = section
        elif isinstance(section, GNUVerSymSection):
            versym = section
        elif isinstance(section, GNUVerNeedSection):
            for verneed, auxes in section.iter_versions():
                for aux in auxes:
                    version_names[int(aux.entry.vna_other)] = (aux.name, verneed.name)
    defined: set[str] = set()
    undefined: list[tuple[str, str | None, str | None]] = []
    if dynsym is not None:
        for i, sym in enumerate(dynsym.iter_symbols()):
            if not sym.name:
                continue
            if sym.entry.st_shndx != "SHN_UNDEF":
                defined.add(sym.name)
                continue
            if sym.entry.st_info.bind == "STB_WEAK":
                continue
            version: str | None = None
            library: str | None = None
            if versym is not None:
                ndx = versym.get_symbol(i).entry.ndx
                if isinstance(ndx, int) and ndx in version_names:
                    version, library = version_names[ndx]
            undefined.append((sym.name, version, library))
    return ElfInfo(
        path=path,
        soname=soname,
        needed=tuple(needed),
        rpaths=tuple(rpaths),
        defined=frozenset(defined),
        undefined=tuple(undefined),
    )


def iter_elves(wheel: Path) -> Iterator[ElfInfo]:
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            with zf.open(info) as fh:
                if fh.read(4) != ELF_MAGIC:
                    continue
            yield _read_elf(info.filename, zf.read(info))


def glibc_needed(elves: Sequence[ElfInfo]) -> tuple[int, int]:
    """The newest GLIBC_x.y symbol version the wheel's ELF files use (2.5, manylinux's floor, if none)."""
    newest = (2, 5)
    for elf in elves:
        for _name, version, _library in elf.undefined:
            m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", version or "")
            if m:
                newest = max(newest, (int(m[1]), int(m[2])))
    return newest


def _dotted(version: Sequence[int]) -> str:
    return ".".join(map(str, version))


def check_glibc_ceiling(wheel_name: str, elves: Sequence[ElfInfo], exp: Expected) -> list[Finding]:
    """The flavour's ceiling: no undefined symbol needs a GLIBC_x.y newer than ``glibc_max`` or a
    GLIBCXX_3.4.z newer than ``glibcxx_max``, and the manylinux tag claims no newer glibc than the ceiling
    (a wheel tagged manylinux_2_38 does not install on RHEL 9 or Ubuntu 22.04, whatever its symbols)."""
    limits = {"GLIBC": exp.glibc_max, "GLIBCXX": exp.glibcxx_max}
    newest: dict[str, tuple[int, ...]] = {}
    over: dict[str, list[str]] = {"GLIBC": [], "GLIBCXX": []}
    for elf in elves:
        for name, version, _library in elf.undefined:
            m = re.fullmatch(r"(GLIBC|GLIBCXX)_(\d+(?:\.\d+)*)", version or "")
            if not m:
                continue
            family, number = m[1], tuple(int(x) for x in m[2].split("."))
            newest[family] = max(newest.get(family, ()), number)
            if number > limits[family]:
                over[family].append(f"{name}@{version} ({elf.path})")
    out: list[Finding] = []
    for family, limit in limits.items():
        bad = sorted(set(over[family]))
        seen = f"{family}_{_dotted(newest[family])}" if family in newest else f"no {family}_* symbol"
        detail = f"newest {seen}, ceiling {family}_{_dotted(limit)}"
        if bad:
            shown = ", ".join(bad[:8]) + (" ..." if len(bad) > 8 else "")
            detail += f"; {len(bad)} symbol(s) above it: {shown}"
        out.append(Finding("glibc-ceiling", not bad, detail))
    m = WHEEL_RE.match(wheel_name)
    claims = [glibc_of_tag(p) for p in m["plat"].split(".")] if m else []
    known = [c for c in claims if c is not None]
    if known:
        claimed = max(known)
        out.append(
            Finding(
                "glibc-ceiling",
                claimed <= exp.glibc_max,
                f"tag claims glibc {_dotted(claimed)}; ceiling {_dotted(exp.glibc_max)} "
                f"(manylinux_{exp.glibc_max[0]}_{exp.glibc_max[1]} or lower)",
            )
        )
    return out


def check_rpath(elves: Sequence[ElfInfo]) -> list[Finding]:
    """Every RPATH/RUNPATH entry is $ORIGIN-relative and stays inside site-packages."""
    out: list[Finding] = []
    for elf in elves:
        depth = len(PurePosixPath(elf.path).parts) - 1  # directories between site-packages and the ELF
        bad: list[str] = []
        for entry in elf.rpaths:
            rest = None
            for origin in ("$ORIGIN", "${ORIGIN}"):
                if entry == origin or entry.startswith(origin + "/"):
                    rest = entry[len(origin) :]
            if rest is None:
                bad.append(f"{entry!r} is not $ORIGIN-relative")
                continue
            level = depth
            for part in PurePosixPath(rest or "/").parts[1:]:
                level += -1 if part == ".." else (0 if part == "." else 1)
                if level < 0:
                    bad.append(f"{entry!r} leaves site-packages")
                    break
        shown = ":".join(elf.rpaths) if elf.rpaths else "none"
        out.append(Finding("rpath", not bad, f"{elf.path}: {'; '.join(bad) if bad else shown}"))
    return out


def check_symbols(elves: Sequence[ElfInfo], exp: Expected) -> list[Finding]:
    """DT_NEEDED only from the flavour's list (never libpython: abi3); undefined symbols all accounted for."""
    out: list[Finding] = []
    in_wheel_sonames = {e.soname or PurePosixPath(e.path).name for e in elves}
    defined_in_wheel = set().union(*(e.defined for e in elves)) if elves else set()
    for elf in elves:
        libpython = [n for n in elf.needed if n.startswith("libpython")]
        stray = [n for n in elf.needed if n not in in_wheel_sonames and not _any(n, exp.needed)]
        detail = f"{elf.path}: NEEDED {list(elf.needed)}"
        if libpython:
            detail += f"; links {libpython}: an abi3 extension must take the C API from the interpreter"
        if stray:
            detail += f"; not allowed for this flavour: {stray}"
        out.append(Finding("needed", not (libpython or stray), detail))
        unexpected: list[str] = []
        for name, version, library in elf.undefined:
            if version is not None:
                system = _any(version, SYSTEM_SYMBOL_VERSIONS)
                if (
                    (system or _any(name, exp.undefined))
                    and library is not None
                    and (_any(library, exp.needed) or library in in_wheel_sonames)
                ):
                    continue
                unexpected.append(f"{name}@{version} ({library})")
            elif name in defined_in_wheel or _any(name, exp.undefined):
                continue
            else:
                unexpected.append(name)
        shown = ", ".join(sorted(unexpected)[:12]) + (" ..." if len(unexpected) > 12 else "")
        out.append(
            Finding(
                "symbols",
                not unexpected,
                f"{elf.path}: {len(elf.undefined)} undefined"
                + (f"; {len(unexpected)} unexpected: {shown}" if unexpected else ", all expected"),
            )
        )
    return out


# --- build_info ------------------------------------------------------------------------------------


def compare_build_info(info: Mapping[str, Any], exp: Expected, where: str) -> list[Finding]:
    out: list[Finding] = []
    plat = info.get("platform")
    out.append(Finding("build_info", plat == exp.platform, f"{where}: platform {plat!r} (expected {exp.platform!r})"))
    archs = info.get("archs")
    got = sorted(_norm_arch(str(a)) for a in archs) if isinstance(archs, list) else None
    want = sorted(_norm_arch(a) for a in exp.archs)
    out.append(Finding("build_info", got == want, f"{where}: archs {got} (expected {want})"))
    coll = info.get("collective")
    out.append(
        Finding(
            "build_info",
            coll == exp.collective,
            f"{where}: collective {coll!r} (expected {exp.collective!r})",
        )
    )
    tk = info.get("toolkit_version")
    if exp.toolkit == "none":
        ok = tk in (None, "", "none")
    else:
        ok = isinstance(tk, str) and (tk == exp.toolkit or tk.startswith(exp.toolkit + "."))
    out.append(Finding("build_info", ok, f"{where}: toolkit_version {tk!r} (expected {exp.toolkit})"))
    return out


def check_build_info_file(wheel: Path, exp: Expected) -> list[Finding]:
    member = f"{exp.package}/build_info.json"
    try:
        with zipfile.ZipFile(wheel) as zf:
            info = json.loads(zf.read(member))
    except KeyError:
        return [Finding("build_info", False, f"{member} is missing from the wheel")]
    except (json.JSONDecodeError, UnicodeDecodeError):
        return [Finding("build_info", False, f"{member} is not JSON")]
    if not isinstance(info, dict):
        return [Finding("build_info", False, f"{member} is not a JSON object")]
    return compare_build_info(info, exp, member)


def static_checks(wheel: Path, exp: Expected, audit: bool = True) -> list[Finding]:
    """Every check that does not install the wheel."""
    findings = check_tag(wheel, exp) + check_size(wheel, exp)
    if not any(f.check == "tag" and not f.ok and "zip" in f.detail for f in findings):
        elves = list(iter_elves(wheel))
        if not elves:
            findings.append(Finding("symbols", False, "the wheel contains no ELF file"))
        findings += check_rpath(elves) + check_symbols(elves, exp) + check_glibc_ceiling(wheel.name, elves, exp)
        findings += check_build_info_file(wheel, exp)
        if audit:
            direct = {n for e in elves for n in e.needed}
            findings += check_auditwheel(wheel, exp, direct=direct, glibc_needed=glibc_needed(elves) if elves else None)
    return findings


def report(findings: Sequence[Finding], title: str) -> bool:
    """Print the findings; True when all passed."""
    failed = [f for f in findings if not f.ok]
    print(f"== {title}: {len(findings) - len(failed)}/{len(findings)} checks passed", flush=True)
    for f in findings:
        print(f"  {f}", flush=True)
    return not failed
