"""The terminal view of a port: colour and a progress line on a terminal, plain text when piped or
under CI (``CI`` set to anything but ``false``/``0``), or with ``NO_COLOR`` / ``--color never``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from tools.hipify import Finding
from tools.port.engine import Diagnostic, PortResult, SideResult, first_sentence, shown
from tools.port.toolkits import display_archs

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


def format_side(side: SideResult, style: Style) -> list[str]:
    label = side.label.ljust(4)
    if side.status == "skipped":
        return [f"  {label}  {_status_word(side, style)}: {side.side.skipped}"]
    archs = ", ".join(display_archs(side.side))
    lines: list[str] = []
    for unit in side.units:
        word = style("ok", "green", "bold") if unit.ok else style("FAILED", "red", "bold")
        lines.append(f"  {label}  {word}  {shown(unit.source)} ({archs})  {unit.seconds:.1f} s")
        if unit.cause is not None:
            cause = unit.cause
            lines.append(f"    {style('cause:', 'bold')} [{cause.cls}] {cause.label}: {cause.reason}")
            lines.append(f"    {style('fix:', 'cyan')} {cause.suggestion}")
        shown_diags = unit.diagnostics[:MAX_DIAGNOSTICS]
        for d in shown_diags:
            lines += format_diagnostic(d, style)
        if len(unit.diagnostics) > len(shown_diags):
            lines.append(f"    ... {len(unit.diagnostics) - len(shown_diags)} more (see --report)")
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


def format_result(result: PortResult, style: Style, *, command: str, strict: bool, diff: bool) -> list[str]:
    cache: dict[Path, list[str]] = {}
    given = len(result.units)
    headers = len(result.sources) - given
    lines = [
        style(f"{command}: ", "bold")
        + f"{len(result.sources)} file{'s' if len(result.sources) != 1 else ''} "
        + f"({given} translation unit{'s' if given != 1 else ''}, {headers} other), "
        + f"target HIP {_version(result.hip_version)}"
    ]
    for side in result.sides.values():
        lines.append(f"  {side.side.describe() if side.status != 'skipped' else side.label + ': skipped'}")
    lines.append("")
    blocking = len(result.blocking)
    lines.append(style(f"findings: {len(result.findings)} ({blocking} blocking)", "bold"))
    for f in result.findings:
        lines += format_finding(f, style, cache)
    lines.append("")
    lines.append(style("compile", "bold"))
    for side in result.sides.values():
        lines += format_side(side, style)
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
