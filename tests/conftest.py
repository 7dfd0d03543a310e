"""Shared fixtures: the tiny world for unit tests (see tests/tinyworld.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# A test never reads or writes a user's state: imported worlds, added world folders and API keys
# live in a fresh REHEARSAL_HOME for the whole session (a test that registers something uses its own).
os.environ["REHEARSAL_HOME"] = tempfile.mkdtemp(prefix="rehearsal-home-")
atexit.register(shutil.rmtree, os.environ["REHEARSAL_HOME"], True)

from pgserver import private_server  # noqa: E402
from tinyworld import build_world  # noqa: E402

from rehearsal_env.worlds import World  # noqa: E402


@pytest.fixture(scope="session")
def tiny_world() -> World:
    """A 2-table world with a payout tool, two roles and three scenarios."""
    return build_world()


# --- PostgreSQL backend (tests/test_postgres.py) ------------------------------------------------
# A private server for the whole session: initdb + postgres on a Unix socket under a temp folder,
# stopped at the end. Tests skip without PostgreSQL binaries, unless REHEARSAL_REQUIRE_POSTGRES=1.
@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a private PostgreSQL server started for this test session."""
    from rehearsal_env.backends._pgcluster import forget

    with private_server("rehearsal-pgtest-") as server:
        yield server.dsn
        forget(server.dsn)
