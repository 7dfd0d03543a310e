"""A private PostgreSQL server for tests: skipped without the binaries, a failure under REHEARSAL_REQUIRE_POSTGRES=1."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rehearsal_env.backends._pgserver import PostgresUnavailable, PrivateServer, find_binaries


@contextmanager
def private_server(prefix: str) -> Iterator[PrivateServer]:
    """A started private server under a fresh temp folder (``prefix``), stopped and removed afterwards."""
    try:
        find_binaries()
    except PostgresUnavailable as exc:
        if os.environ.get("REHEARSAL_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_POSTGRES=1 but {exc}")
        pytest.skip(str(exc))
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o711)  # under root the server runs as another account, which must reach its folder
    server = PrivateServer(base / "data")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
