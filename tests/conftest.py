"""Shared fixtures: the tiny world for unit tests (see tests/tinyworld.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tinyworld import build_world  # noqa: E402

from rehearsal_env.worlds import World  # noqa: E402


@pytest.fixture(scope="session")
def tiny_world() -> World:
    """A 2-table world with a payout tool, two roles and three scenarios."""
    return build_world()
