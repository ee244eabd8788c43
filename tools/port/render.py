"""The terminal view of a port: colour and a progress line on a terminal, plain text when piped or
under CI (``CI`` set to anything but ``false``/``0``), or with ``NO_COLOR`` / ``--color never``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from tools.hipify import Finding
from tools.port.engine import Diagnostic, PortResult, SideResult, first_sentence, shown
from tools.port.toolkits import display_archs, macro_flags

COLOR_CHOICES = ("auto", "always", "never")
MAX_DIAGNOSTICS = 20  # per side on the terminal; the report has all of them


def under_ci(environ: Mapping[str, str]) -> bool:
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def interactive(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """A person is watching: a terminal, not CI, not a dumb terminal."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and not under_ci(environ) and environ.get("TERM", "") != "dumb"


def use_colour(choice: str, stream: TextIO, environ: Mapping[str, str]) -> bool:
    if choice == "always":
        return True
    if choice == "never" or "NO_COLOR" in environ:
        return False
    return interactive(stream, environ)


class Style:
    """ANSI styling, or none. One per run (no global state)."""

    _CODES: Mapping[str, str] = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles or not text:
            return text
        codes = ";".join(self._CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


class ProgressLine:
    """``[3/5] ROCm k.cu`` redrawn in place on a terminal; nothing otherwise."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._drawn = False

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.enabled:
            return
        self.stream.write(f"\r\033[K[{done}/{total}] {what}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False


def caret_line(text: str, column: int) -> str:
    """Spaces (tabs kept, so the caret lines up) up to ``column`` (1-based, counted in UTF-8 bytes)."""
    prefix = text.encode("utf-8")[: max(column - 1, 0)].decode("utf-8", errors="ignore")
    return "".join("\t" if c == "\t" else " " for c in prefix) + "^"


def source_line(path: Path, line: int, cache: dict[Path, list[str]]) -> str:
    if path not in cache:
        try:
            cache[path] = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[line - 1] if 0 < line <= len(lines) else ""


def excerpt(text: str, line: int, column: int, style: Style, indent: str = "  ") -> list[str]:
    """The source line with its number, and a caret under the column."""
    if not text or line <= 0:
        return []
    gutter = str(line)
    out = [f"{indent}{style(gutter.rjust(5), 'dim')} | {text}"]
    if column > 0:
        out.append(f"{indent}{' ' * 5} | {style(caret_line(text, column), 'green', 'bold')}")
    return out


def format_finding(f: Finding, style: Style, cache: dict[Path, list[str]]) -> list[str]:
    colour = "red" if f.blocking else "yellow"
    rule = f" [{f.rule}]" if f.rule else ""
    where = f"{shown(f.file)}:{f.line}:{f.column}" if f.line else shown(f.file)
    head = f"{style(where, 'bold')}: {style(f.kind, colour, 'bold')}{rule}"
    head += style(" (blocking)", colour) if f.blocking else " (warning)"
    lines = [head, f"  {f.name}: {f.reason}"]
    lines += excerpt(source_line(f.file, f.line, cache), f.line, f.column, style)
    lines.append(f"  {style('fix:', 'cyan')} {f.suggestion}")
    return lines


def format_diagnostic(d: Diagnostic, style: Style) -> list[str]:
    colour = "red" if d.is_error else "yellow"
    where = d.location()
    head = f"{style(where, 'bold')}: " if where else ""
    lines = [f"    {head}{style(d.severity, colour, 'bold')}: {d.message}"]
    lines += excerpt(d.source_text, d.line, d.column, style, indent="    ")
    return lines


def _status_word(side: SideResult, style: Style) -> str:
    word = {"ok": "ok", "failed": "FAILED", "skipped": "skipped", "empty": "nothing to compile"}[side.status]
    colour = {"ok": "green", "failed": "red", "skipped": "yellow", "empty": "yellow"}[side.status]
    return style(word, colour, "bold")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def format_side(side: SideResult, style: Style, *, verbose: bool = True) -> list[str]:
    """One line per unit; under a failed one its cause and its compiler messages: all of them when ``verbose``
    (up to MAX_DIAGNOSTICS), else the first error, with the count of the rest."""
    label = side.label.ljust(4)
    if side.status == "skipped":
        return [f"  {label}  {_status_word(side, style)}: {side.side.skipped}"]
    archs = ", ".join(display_archs(side.side))
    lines: list[str] = []
    for unit in side.units:
        word = style("ok", "green", "bold") if unit.ok else style("FAILED", "red", "bold")
        errors = unit.errors
        warnings = len(unit.diagnostics) - len(errors)
        counts = [_count(len(errors), "error")] if errors else []
        counts += [_count(warnings, "warning")] if warnings else []
        tail = f": {', '.join(counts)}" if counts and not verbose else ""
        lines.append(f"  {label}  {word}  {shown(unit.source)} ({archs})  {unit.seconds:.1f} s{tail}")
        if unit.cause is not None:
            cause = unit.cause
            lines.append(f"    {style('cause:', 'bold')} [{cause.cls}] {cause.label}: {cause.reason}")
            lines.append(f"    {style('fix:', 'cyan')} {cause.suggestion}")
        if verbose:
            shown_diags = unit.diagnostics[:MAX_DIAGNOSTICS]
        else:
            shown_diags = errors[:1]
        for d in shown_diags:
            lines += format_diagnostic(d, style)
        rest = len(unit.diagnostics) - len(shown_diags)
        if rest > 0 and verbose:
            lines.append(f"    ... {rest} more (see --report)")
        elif rest > 0 and not unit.ok:  # (an ok unit's warnings are counted on its line)
            left = [_count(len(errors) - len(shown_diags), "error")] if len(errors) > len(shown_diags) else []
            left += [_count(warnings, "warning")] if warnings else []
            lines.append(f"    ... {' and '.join(left)} more (--verbose or --report shows them)")
    if not side.units:
        lines.append(f"  {label}  {_status_word(side, style)}")
    return lines


def format_diff(text: str, style: Style) -> list[str]:
    out: list[str] = []
    for ln in text.rstrip("\n").splitlines():
        if ln.startswith(("+++", "---")):
            out.append(style(ln, "bold"))
        elif ln.startswith("@@"):
            out.append(style(ln, "cyan"))
        elif ln.startswith("+"):
            out.append(style(ln, "green"))
        elif ln.startswith("-"):
            out.append(style(ln, "red"))
        else:
            out.append(ln)
    return out


def _version(v: tuple[int, int] | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "newest (no ROCm found)"


def _per_file(findings: list[Finding], limit: int = 4) -> str:
    counts: dict[str, int] = {}
    for f in findings:
        counts[shown(f.file)] = counts.get(shown(f.file), 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{name} {n}" for name, n in ranked[:limit])
    return text + (f", {len(ranked) - limit} more files" if len(ranked) > limit else "")


def format_findings(result: PortResult, style: Style, *, verbose: bool, cache: dict[Path, list[str]]) -> list[str]:
    """Every finding when ``verbose``; else the blocking findings in the files the units include (a compile
    failure's is shown with its unit), and counts of the rest."""
    lines = [style(f"findings: {len(result.findings)} ({len(result.blocking)} blocking)", "bold")]
    if verbose:
        for f in result.findings:
            lines += format_finding(f, style, cache)
        return lines
    included = result.included
    shown_here = [f for f in result.blocking if f.file in included and f.kind != "compile"]
    elsewhere = [f for f in result.blocking if f.file not in included]
    compile_causes = [f for f in result.blocking if f.file in included and f.kind == "compile"]
    others = [f for f in result.findings if not f.blocking]
    if result.blocking:
        what = "unit includes" if len(result.units) == 1 else "units include"
        lines.append(f"  blocking, in the files the {what}: {len(shown_here)}")
        if compile_causes:
            lines[-1] += f" (and {_count(len(compile_causes), 'compile failure')}, above)"
        if elsewhere:
            where = _per_file(elsewhere)
            lines.append(f"  blocking, in files no unit includes: {len(elsewhere)} ({where}; --verbose lists them)")
    if others:
        kinds: dict[str, int] = {}
        for f in others:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        listed = ", ".join(f"{k} {n}" for k, n in kinds.items())
        lines.append(f"  not blocking: {len(others)} ({listed}; --verbose lists them)")
    for f in shown_here:
        lines += format_finding(f, style, cache)
    return lines


def format_result(
    result: PortResult, style: Style, *, command: str, strict: bool, diff: bool, verbose: bool = True
) -> list[str]:
    """The terminal view: the summary (files, target, each side, each unit's compile with its first error), the
    findings (see format_findings), the diff when ``diff``, the verdict. ``verbose``: everything."""
    cache: dict[Path, list[str]] = {}
    given = len(result.units)
    headers = len(result.sources) - given
    lines = [
        style(f"{command}: ", "bold")
        + f"{len(result.sources)} file{'s' if len(result.sources) != 1 else ''} "
        + f"({given} translation unit{'s' if given != 1 else ''}, {headers} other), "
        + f"target HIP {_version(result.hip_version)}"
        + (f", with {' '.join(macro_flags(result.request.defines))}" if result.request.defines else "")
    ]
    for side in result.sides.values():
        lines.append(f"  {side.side.describe() if side.status != 'skipped' else side.label + ': skipped'}")
        libraries = side.side.libraries_line() if side.status != "skipped" else ""
        if libraries:
            lines.append(f"    {libraries}")
    lines.append("")
    lines.append(style("compile", "bold"))
    for side in result.sides.values():
        lines += format_side(side, style, verbose=verbose)
    lines.append("")
    lines += format_findings(result, style, verbose=verbose, cache=cache)
    if diff:
        changed = [d for d in result.diffs if d.text]
        lines.append("")
        lines.append(style(f"diff CUDA -> HIP: {len(changed)} file{'s' if len(changed) != 1 else ''} changed", "bold"))
        for d in changed:
            lines += format_diff(d.text, style)
    lines.append("")
    problems = result.problems(strict)
    if problems:
        lines.append(style(f"{command}: FAILED", "red", "bold"))
        lines += [f"  - {p}" for p in problems]
    else:
        skipped = [s for s in result.sides.values() if s.status == "skipped"]
        verdict = "ok" if not skipped else "ok, with " + " and ".join(f"the {s.label} side skipped" for s in skipped)
        lines.append(style(f"{command}: {verdict}", "green" if not skipped else "yellow", "bold"))
        for s in skipped:
            lines.append(f"  - {s.label} skipped: {first_sentence(s.side.skipped)} (--strict makes this fail)")
    return lines


_ANSI = re.compile(r"\033\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)
