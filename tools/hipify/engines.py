"""``--engine hipify_torch``: run hipify_torch (or torch.utils.hipify) on each file's text, inside the same
out-of-tree, incremental, encoding-safe wrapper and report as the built-in engine.

The external engines work on ``str``: the bytes are decoded as Latin-1 (lossless: every byte maps to one
code point) and encoded back the same way, so no byte is lost even for invalid UTF-8.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from re import Pattern

from tools.errors import ToolError

_CANDIDATES = (
    "hipify_torch.v2.hipify_python",
    "hipify_torch.hipify_python",
    "torch.utils.hipify.hipify_python",
)


def _load() -> tuple[str, Pattern[str], dict[str, str]]:
    errors = []
    for name in _CANDIDATES:
        try:
            mod = importlib.import_module(name)
        except Exception as err:
            errors.append(f"{name}: {type(err).__name__}: {err}")
            continue
        trie = getattr(mod, "RE_PYTORCH_PREPROCESSOR", None) or getattr(mod, "RE_CAFFE2_PREPROCESSOR", None)
        mapping = getattr(mod, "PYTORCH_MAP", None) or getattr(mod, "CAFFE2_MAP", None)
        if trie is None or mapping is None:
            errors.append(f"{name}: no RE_PYTORCH_PREPROCESSOR/PYTORCH_MAP")
            continue
        return name, trie, mapping
    raise ToolError(
        "--engine hipify_torch: neither hipify_torch nor torch.utils.hipify is importable ("
        + "; ".join(errors)
        + "); install one, or use the built-in engine"
    )


def external_translator() -> Callable[[str, bytes], bytes]:
    """A function (path, original bytes) -> translated bytes with the external engine's mapping trie.

    This is hipify_torch's core (its one big regex and its map, applied everywhere, comments and strings
    included, as it does); include rewriting, naming, incrementality and the report stay ours.
    """
    _name, pattern, mapping = _load()

    def repl(m: re.Match[str]) -> str:
        dst = mapping.get(m.group(0), m.group(0))
        if isinstance(dst, (tuple, list)):
            dst = dst[0]
        return str(dst)

    def translate(_path: str, data: bytes) -> bytes:
        # Latin-1 maps every byte to one code point: lossless for any input, unlike the engine's own
        # UTF-8 reading, which aborts on the first non-UTF-8 file.
        return pattern.sub(repl, data.decode("latin-1")).encode("latin-1")

    return translate


def available() -> str | None:
    """The importable external engine's module name, or None."""
    try:
        return _load()[0]
    except ToolError:
        return None
