"""Where the tests find tau2-bench's data (shared/ beside the clone); skip or fail when it is missing."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from rehearsal_env.importers.tau2 import build_tau2_world
from rehearsal_env.worlds import World

TAU2 = Path(__file__).resolve().parents[1].parent / "shared/third_party/tau2-bench"


def tau2_source() -> Path:
    """The tau2-bench folder; skips the test without it, or fails when REHEARSAL_REQUIRE_TAU2=1."""
    if not (TAU2 / "data" / "tau2" / "domains").is_dir():
        message = f"tau2-bench data not found at {TAU2}"
        if os.environ.get("REHEARSAL_REQUIRE_TAU2") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_TAU2=1 but {message}")
        pytest.skip(message)
    return TAU2


@functools.lru_cache(maxsize=2)
def tau2_world(domain: str) -> World:
    """The world ``tau2-<domain>`` built straight from the source folder (once per test process)."""
    return build_tau2_world(f"tau2-{domain}", tau2_source(), domain)
