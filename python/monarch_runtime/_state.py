"""Nested training state for ``transfer_state``: leaves, their dotted names, and the values that are
not tensors (step counters, learning rates, small bytes), encoded for the manifest.

A *state* is a mapping, nested as deep as needed (a model's ``state_dict()``, an optimizer's, a dict
of both); lists and tuples that hold tensors are walked too (index = key). A leaf is a *tensor* when
it is a ``monarch_runtime.Buffer`` or any DLPack producer (numpy array, torch or CuPy tensor), and a
*value* otherwise: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` and lists, tuples and
dicts of those (numpy scalars are taken as their Python value). Values travel in the manifest, so
they must stay small (``VALUE_LIMIT`` bytes once encoded).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

#: Largest encoded non-tensor leaf (bytes): larger data belongs in a tensor or a Buffer.
VALUE_LIMIT = 1 << 20

Path = tuple[Any, ...]


def is_numpy_scalar(obj: object) -> bool:
    """numpy scalars (``np.float32(1.0)``) export DLPack in recent numpy but are immutable values."""
    return any(c.__module__ == "numpy" and c.__name__ == "generic" for c in type(obj).__mro__)


def is_tensor(obj: object, buffer_type: type) -> bool:
    return isinstance(obj, buffer_type) or (hasattr(obj, "__dlpack__") and not is_numpy_scalar(obj))


def _holds_tensor(obj: object, buffer_type: type) -> bool:
    if is_tensor(obj, buffer_type):
        return True
    if isinstance(obj, Mapping):
        return any(_holds_tensor(v, buffer_type) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_holds_tensor(v, buffer_type) for v in obj)
    return False


def leaf_name(path: Path) -> str:
    return ".".join(str(k) for k in path)


def flatten(state: Mapping[Any, Any], buffer_type: type) -> list[tuple[str, Path, Any, bool]]:
    """Every leaf in order: (dotted name, path, leaf, is_tensor). Two leaves with one name are an error."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a state is a mapping of names to tensors and values, not a {type(state).__name__}")
    out: list[tuple[str, Path, Any, bool]] = []

    def walk(obj: Any, path: Path) -> None:
        if is_tensor(obj, buffer_type):
            out.append((leaf_name(path), path, obj, True))
        elif isinstance(obj, Mapping):
            for key, value in obj.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    where = leaf_name(path)
                    raise TypeError(f"state keys are str or int, not {type(key).__name__} ({key!r} in {where!r})")
                walk(value, (*path, key))
        elif isinstance(obj, (list, tuple)) and _holds_tensor(obj, buffer_type):
            for index, value in enumerate(obj):
                walk(value, (*path, index))
        else:
            out.append((leaf_name(path), path, obj, False))

    walk(state, ())
    seen: dict[str, Path] = {}
    for name, path, _, _ in out:
        if name in seen:
            raise ValueError(f"two leaves of the state are both named {name!r} (paths {seen[name]!r} and {path!r})")
        seen[name] = path
    return out


def _encode(value: Any, name: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"i": str(value)}
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, (bytes, bytearray)):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, tuple):
        return {"t": [_encode(v, name) for v in value]}
    if isinstance(value, list):
        return [_encode(v, name) for v in value]
    if isinstance(value, Mapping):
        return {"d": [[_encode(k, name), _encode(v, name)] for k, v in value.items()]}
    if is_numpy_scalar(value):
        return _encode(value.item(), name)
    raise TypeError(
        f"leaf {name!r} is a {type(value).__name__}: a state's leaves are tensors (DLPack producers, Buffers) "
        "or plain values (None, bool, int, float, str, bytes, and lists/tuples/dicts of them)"
    )


def _decode(obj: Any) -> Any:
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    if isinstance(obj, dict) and len(obj) == 1:
        ((tag, body),) = obj.items()
        if tag == "i":
            return int(body)
        if tag == "f":
            return float.fromhex(body)
        if tag == "b":
            return base64.b64decode(body)
        if tag == "t":
            return tuple(_decode(v) for v in body)
        if tag == "d":
            return {_decode(k): _decode(v) for k, v in body}
    raise ValueError(f"malformed value in the donor's manifest: {obj!r}")


def encode_value(value: Any, name: str) -> bytes:
    data = json.dumps(_encode(value, name), separators=(",", ":")).encode("utf-8")
    if len(data) > VALUE_LIMIT:
        raise ValueError(
            f"leaf {name!r} is {len(data)} bytes encoded (limit {VALUE_LIMIT}): values travel in the manifest; "
            "carry large data as a tensor or a Buffer"
        )
    return data


def decode_value(data: bytes) -> Any:
    return _decode(json.loads(data.decode("utf-8")))


def rebuild(state: Any, values: Mapping[str, Any], buffer_type: type, path: Path = ()) -> Any:
    """``state``'s structure with its own tensors and, at each value leaf, the donor's value."""
    if is_tensor(state, buffer_type):
        return state
    if isinstance(state, Mapping):
        try:
            out: Any = type(state)()
            if not hasattr(out, "__setitem__"):
                out = {}
        except TypeError:
            out = {}
        for key, value in state.items():
            out[key] = rebuild(value, values, buffer_type, (*path, key))
        return out
    if isinstance(state, (list, tuple)) and _holds_tensor(state, buffer_type):
        items = [rebuild(v, values, buffer_type, (*path, i)) for i, v in enumerate(state)]
        return tuple(items) if isinstance(state, tuple) else items
    name = leaf_name(path)
    return values[name] if name in values else state
