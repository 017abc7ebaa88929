"""Shared helpers of the pytest suite of the Python package."""

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def fox_binary(name: str) -> pathlib.Path:
    """A Fox binary (foxrun, foxbench): from $FOX_BIN_DIR, else the workspace's debug
    build (made by `cargo test --workspace`, which .ci/run runs first)."""
    folder = pathlib.Path(os.environ.get("FOX_BIN_DIR", REPO / "target" / "debug"))
    path = folder / name
    if not path.is_file():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{path} is missing: build it with `cargo build -p fox-cli --bins` (or set FOX_BIN_DIR)")
        return pathlib.Path(found)
    return path


@pytest.fixture
def repo() -> pathlib.Path:
    return REPO
