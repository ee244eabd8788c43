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


@pytest.fixture(scope="session")
def generated_corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """~300 KB of bench/hipify_bench.py's synthetic tree, written once per session (the engine comparisons)."""
    from _native_support import files_under, make_generated  # noqa: PLC0415

    root = tmp_path_factory.mktemp("generated-corpus")
    make_generated(root, 300_000)
    return files_under(root)
