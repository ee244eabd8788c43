from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.hipify.mapping import MappingDatabase, load_database
from tools.hipify.translate import Translator

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture(scope="session")
def db() -> MappingDatabase:
    return load_database()


@pytest.fixture(scope="session")
def tr52(db: MappingDatabase) -> Translator:
    return Translator(db, (5, 2))


@pytest.fixture(scope="session")
def tr_newest(db: MappingDatabase) -> Translator:
    return Translator(db, None)


def _write(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


@pytest.fixture
def write() -> Callable[[Path, dict[str, bytes | str]], None]:
    """write(root, {relpath: content}) creates files."""
    return _write
