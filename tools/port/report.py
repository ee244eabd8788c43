"""The report file a reviewer opens: Markdown (``.md``) or self-contained HTML (``.html``/``.htm``).

Sections, always in this order and always present (an empty one says so): Summary, Findings,
CUDA compile, ROCm compile, CUDA -> HIP diff. Compiler messages are shown with their positions mapped
back to the CUDA source and the source line they point at.
"""

from __future__ import annotations

import html
import json
import os
import shlex
from pathlib import Path

from tools.errors import ToolError
from tools.port.engine import PortResult, SideResult, first_sentence, shown
from tools.port.render import caret_line, source_line
from tools.port.toolkits import SIDE_LABEL, SIDES, display_archs, macro_flags

FORMATS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".json": "json"}
JSON_SCHEMA = "monarch-runtime/port-report/v1"
SECTIONS = ("Summary", "Findings", "CUDA compile", "ROCm compile", "CUDA -> HIP diff")


def report_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ToolError(f"report {path}: the file name must end in .md, .html or .json (the format is chosen by it)")
    return fmt


def _version(v: tuple[int, int] | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "newest"


def _side_status(side: SideResult | None, name: str) -> str:
    if side is None:
        return "not requested"
    if side.status == "skipped":
        return f"skipped: {first_sentence(side.side.skipped)}"
    if side.status == "empty":
        return "nothing to compile"
    archs = ", ".join(display_archs(side.side))
    if side.status == "ok":
        return f"compiles ({archs})"
    return f"FAILS ({archs}): {len(side.errors)} error{'s' if len(side.errors) != 1 else ''}"


def _summary_rows(result: PortResult, strict: bool) -> list[tuple[str, str]]:
    problems = result.problems(strict)
    rows = [
        ("Verdict", "FAILED" if problems else "passes"),
        ("Files", ", ".join(shown(p) for p in result.sources)),
        ("Target HIP", _version(result.hip_version)),
        *([("Defines", " ".join(macro_flags(result.request.defines)))] if result.request.defines else []),
        ("Findings", f"{len(result.findings)} ({len(result.blocking)} blocking)"),
    ]
    rows += [(f"{SIDE_LABEL[n]} compile", _side_status(result.sides.get(n), n)) for n in SIDES]
    rows += [("Problem", p) for p in problems]
    return rows


# -- Markdown -------------------------------------------------------------------------------------
def _fence(text: str, lang: str = "") -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [f"{ticks}{lang}", text.rstrip("\n"), ticks]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_side(side: SideResult | None, name: str) -> list[str]:
    title = f"## {SIDE_LABEL[name]} compile"
    if side is None:
        return [title, "", "Not requested.", ""]
    if side.status == "skipped":
        return [title, "", f"**Skipped**: {side.side.skipped}", ""]
    lines = [title, "", f"{side.side.describe()}", ""]
    if not side.units:
        return [*lines, "Nothing to compile (no translation unit among the files).", ""]
    for unit in side.units:
        verdict = "compiles" if unit.ok else f"**FAILS** (exit status {unit.returncode})"
        lines += [f"### `{shown(unit.source)}`: {verdict} in {unit.seconds:.1f} s", ""]
        if unit.cause is not None:
            c = unit.cause
            lines += [f"**Cause** (`{c.cls}`, {c.label}): {c.reason}", "", f"Fix: {c.suggestion}", ""]
        if unit.diagnostics:
            lines += ["| where (CUDA source) | severity | message |", "|---|---|---|"]
            lines += [
                f"| `{_md_cell(d.location() or '-')}` | {d.severity} | {_md_cell(d.message)} |"
                for d in unit.diagnostics
            ]
            lines.append("")
            for d in unit.diagnostics:
                if d.source_text and d.line:
                    lines += [f"`{d.location()}`:", ""]
                    body = f"{d.line:5} | {d.source_text}"
                    if d.column:
                        body += f"\n      | {caret_line(d.source_text, d.column)}"
                    lines += [*_fence(body), ""]
        lines += ["<details><summary>command and full compiler output</summary>", ""]
        lines += [*_fence(shlex.join(unit.command), "sh"), ""]
        lines += [*_fence(unit.output or "(no output)"), "", "</details>", ""]
    return lines


def markdown(result: PortResult, *, title: str, strict: bool) -> str:
    cache: dict[Path, list[str]] = {}
    lines = [f"# {title}", "", "## Summary", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {_md_cell(v)} |" for k, v in _summary_rows(result, strict)]
    lines += ["", "## Findings", ""]
    if not result.findings:
        lines += ["No findings: nothing unportable, no hazard.", ""]
    for f in result.findings:
        where = f"{shown(f.file)}:{f.line}:{f.column}" if f.line else shown(f.file)
        tag = "blocking" if f.blocking else "warning"
        rule = f" `[{f.rule}]`" if f.rule else ""
        lines += [f"### `{where}` — {f.kind}{rule} ({tag})", "", f"`{f.name}`: {f.reason}", ""]
        text = source_line(f.file, f.line, cache)
        if text:
            lines += [*_fence(f"{f.line:5} | {text}\n      | {caret_line(text, f.column)}"), ""]
        lines += [f"Fix: {f.suggestion}", ""]
    for name in SIDES:
        lines += _md_side(result.sides.get(name), name)
    lines += ["## CUDA -> HIP diff", ""]
    changed = [d for d in result.diffs if d.text]
    if not changed:
        lines += ["hipify changed nothing.", ""]
    for d in changed:
        lines += [*_fence(d.text, "diff"), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# -- HTML -----------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:75em;padding:0 1em;color:#1d1d1f}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:90%}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
.fail{color:#b3261e;font-weight:bold}.ok{color:#1a7f37;font-weight:bold}.warn{color:#9a6700;font-weight:bold}
.add{color:#1a7f37}.del{color:#b3261e}.hunk{color:#0969da}.caret{color:#1a7f37;font-weight:bold}
"""


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _html_excerpt(text: str, line: int, column: int) -> str:
    body = _e(f"{line:5} | {text}")
    if column:
        body += "\n      | " + f'<span class="caret">{_e(caret_line(text, column))}</span>'
    return f"<pre>{body}</pre>"


def _html_side(side: SideResult | None, name: str) -> list[str]:
    anchor = f'id="{name}-compile"'
    out = [f"<h2 {anchor}>{SIDE_LABEL[name]} compile</h2>"]
    if side is None:
        return [*out, "<p>Not requested.</p>"]
    if side.status == "skipped":
        return [*out, f'<p><span class="warn">Skipped</span>: {_e(side.side.skipped)}</p>']
    out.append(f"<p>{_e(side.side.describe())}</p>")
    if not side.units:
        out.append("<p>Nothing to compile (no translation unit among the files).</p>")
    for unit in side.units:
        verdict = (
            '<span class="ok">compiles</span>'
            if unit.ok
            else f'<span class="fail">FAILS</span> (exit status {unit.returncode})'
        )
        out.append(f"<h3><code>{_e(shown(unit.source))}</code>: {verdict} in {unit.seconds:.1f} s</h3>")
        if unit.cause is not None:
            c = unit.cause
            out.append(
                f"<p><b>Cause</b> (<code>{_e(c.cls)}</code>, {_e(c.label)}): {_e(c.reason)}</p>"
                f"<p>Fix: {_e(c.suggestion)}</p>"
            )
        if unit.diagnostics:
            out.append("<table><tr><th>where (CUDA source)</th><th>severity</th><th>message</th></tr>")
            for d in unit.diagnostics:
                cls = "fail" if d.is_error else "warn"
                excerpt = _html_excerpt(d.source_text, d.line, d.column) if d.source_text else ""
                out.append(
                    f'<tr><td><code>{_e(d.location() or "-")}</code></td><td class="{cls}">{_e(d.severity)}</td>'
                    f"<td>{_e(d.message)}{excerpt}</td></tr>"
                )
            out.append("</table>")
        out.append("<details><summary>command and full compiler output</summary>")
        out.append(f"<pre>{_e(shlex.join(unit.command))}</pre><pre>{_e(unit.output or '(no output)')}</pre></details>")
    return out


def _html_diff(text: str) -> str:
    rows = []
    for ln in text.rstrip("\n").splitlines():
        cls = ""
        if ln.startswith(("+++", "---")):
            cls = ""
        elif ln.startswith("@@"):
            cls = "hunk"
        elif ln.startswith("+"):
            cls = "add"
        elif ln.startswith("-"):
            cls = "del"
        rows.append(f'<span class="{cls}">{_e(ln)}</span>' if cls else _e(ln))
    return "<pre>" + "\n".join(rows) + "</pre>"


def html_report(result: PortResult, *, title: str, strict: bool) -> str:
    cache: dict[Path, list[str]] = {}
    rows = _summary_rows(result, strict)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        '<h2 id="summary">Summary</h2><table>',
    ]
    for key, value in rows:
        cls = ' class="fail"' if value == "FAILED" or key == "Problem" else (' class="ok"' if value == "passes" else "")
        out.append(f"<tr><th>{_e(key)}</th><td{cls}>{_e(value)}</td></tr>")
    out += ["</table>", '<h2 id="findings">Findings</h2>']
    if not result.findings:
        out.append("<p>No findings: nothing unportable, no hazard.</p>")
    for f in result.findings:
        where = f"{shown(f.file)}:{f.line}:{f.column}" if f.line else shown(f.file)
        cls = "fail" if f.blocking else "warn"
        rule = f" [{f.rule}]" if f.rule else ""
        out.append(
            f'<h3><code>{_e(where)}</code> — <span class="{cls}">{_e(f.kind)}{_e(rule)}</span> '
            f"({'blocking' if f.blocking else 'warning'})</h3>"
        )
        out.append(f"<p><b>{_e(f.name)}</b>: {_e(f.reason)}</p>")
        text = source_line(f.file, f.line, cache)
        if text:
            out.append(_html_excerpt(text, f.line, f.column))
        out.append(f"<p>Fix: {_e(f.suggestion)}</p>")
    for name in SIDES:
        out += _html_side(result.sides.get(name), name)
    out.append('<h2 id="diff">CUDA -&gt; HIP diff</h2>')
    changed = [d for d in result.diffs if d.text]
    if not changed:
        out.append("<p>hipify changed nothing.</p>")
    out += [_html_diff(d.text) for d in changed]
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# -- JSON (tools/port/data/port-report.schema.json) -------------------------------------------------------
def json_report(result: PortResult, *, title: str, strict: bool) -> dict[str, object]:
    problems = result.problems(strict)
    sides: dict[str, object] = {}
    for name in SIDES:
        side = result.sides.get(name)
        if side is None:
            continue
        sides[name] = {
            "status": side.status,
            "skipped": side.side.skipped,
            "archs": display_archs(side.side),
            "units": [
                {
                    "source": str(u.source),
                    "compiled": str(u.compiled),
                    "ok": u.ok,
                    "returncode": u.returncode,
                    "seconds": round(u.seconds, 3),
                    "command": list(u.command),
                    "errors": [
                        {"location": d.location(), "severity": d.severity, "message": d.message} for d in u.errors
                    ],
                    "cause": u.cause.to_json() if u.cause is not None else None,
                }
                for u in side.units
            ],
        }
    return {
        "schema": JSON_SCHEMA,
        "title": title,
        "verdict": "FAILED" if problems else "passes",
        "problems": problems,
        "hip_version": _version(result.hip_version) if result.hip_version else None,
        "defines": macro_flags(result.request.defines),
        "files": [str(p) for p in result.sources],
        "findings": [f.to_json() for f in result.findings],
        "blocking": len(result.blocking),
        "sides": sides,
        "seconds": round(result.seconds, 3),
    }


def write_report(path: Path, result: PortResult, *, title: str, strict: bool) -> Path:
    """Write the report atomically; the format follows the file name."""
    fmt = report_format(path)
    if fmt == "json":
        text = json.dumps(json_report(result, title=title, strict=strict), indent=1) + "\n"
    elif fmt == "html":
        text = html_report(result, title=title, strict=strict)
    else:
        text = markdown(result, title=title, strict=strict)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        raise ToolError(f"cannot write report {path}: {err.strerror or err}") from None
    return path
