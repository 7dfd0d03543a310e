"""Shared fixtures: the tiny world for unit tests (see tests/tinyworld.py)."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# A test never reads or writes a user's state: imported worlds, added world folders and API keys
# live in a fresh REHEARSAL_HOME for the whole session (a test that registers something uses its own).
os.environ["REHEARSAL_HOME"] = tempfile.mkdtemp(prefix="rehearsal-home-")
atexit.register(shutil.rmtree, os.environ["REHEARSAL_HOME"], True)

# Every Ray the suite starts (local ones by ray.init, the 2-node cluster by `ray start`) uses one auth mode.
# Ray fixes its mode for the whole process at the first ray.init: a local start turns token authentication
# on (RAY_AUTH_MODE=token in os.environ, a token in ~/.ray), and a later cluster started without it then
# loses every actor the driver creates ("all references to the actor were removed"). The suite's Rays
# listen on loopback only.
os.environ["RAY_AUTH_MODE"] = "disabled"

from pgserver import private_server  # noqa: E402
from tinyworld import build_world  # noqa: E402

from rehearsal_env.records import create_signing_key  # noqa: E402
from rehearsal_env.worlds import World  # noqa: E402

create_signing_key()  # the session's run-signing key, made up front: no test's stderr gets the first run's note


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


# --- The slowest files start first ------------------------------------------------------------------------
# `make test` runs the files in 2 processes (pytest-xdist, a file each, handed out in collection order:
# --no-loadscope-reorder, else xdist hands out the files with the most tests first). A file of minutes that
# starts last runs alone at the end; started first, it runs beside everything else.
SLOW_FIRST = ("test_learn_smoke.py", "test_live_model.py", "test_gguf_export.py", "test_gateway.py",
              "test_infra_faults.py", "test_runner.py", "test_versions.py", "test_grpo_smoke.py", "test_pool.py",
              "test_serve_workers.py", "test_serve_proxy.py", "test_resume_midway.py", "test_measure.py")
"""Files that take the longest (from `--durations` of whole runs), longest first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the items of :data:`SLOW_FIRST`'s files first, in its order (the rest keep theirs)."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# --- Why tests skipped: at the end of every session, grouped by the part that is missing -------------
# Each group says what is missing, how to install it, and the REHEARSAL_REQUIRE_<PART> that turns the skip
# into a failure (as .ci/run sets them all).
_PARTS: tuple[tuple[str, str, str, str], ...] = (
    ("an opt-in (a long test that make test leaves out)", r"^opt-in", "set the variable the reason names", ""),
    ("PostgreSQL server binaries", r"postgres|initdb",
     "apt-get install postgresql, or set REHEARSAL_POSTGRES_BIN / REHEARSAL_POSTGRES_DSN", "POSTGRES"),
    ("a Docker daemon and the sandbox images", r"docker|sandbox",
     "start dockerd (apt-get install docker.io debootstrap), then `python -m rehearsal_env.sandbox`", "DOCKER"),
    ("tau2-bench's data", r"tau2", "put tau2-bench beside the clone: ../shared/third_party/tau2-bench", "TAU2"),
    ("curl and jq", r"\bcurl\b|\bjq\b", "apt-get install curl jq", "CURL_AGENT"),
)
_EXTRA = re.compile(r"pip install -e '\.\[(\w+)\]'")


def _part_of(reason: str) -> tuple[str, str, str]:
    """(what is missing, how to install it, its REHEARSAL_REQUIRE_ variable) for a skip reason."""
    extra = _EXTRA.search(reason)
    if extra:
        name = extra[1]
        require = {"live": "LIVE_MODEL"}.get(name, name.upper())
        return f"the {name!r} extra", f"pip install -e '.[{name}]'", f"REHEARSAL_REQUIRE_{require}"
    for what, pattern, how, require in _PARTS:
        if re.search(pattern, reason, re.IGNORECASE):
            return what, how, f"REHEARSAL_REQUIRE_{require}" if require else ""
    return "something else", "see each reason", ""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After the run: every skipped test's reason, grouped by the missing part, with how to install it."""
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        groups[_part_of(reason)].append((report.nodeid, reason))
    if not groups:
        return
    total = sum(len(tests) for tests in groups.values())
    terminalreporter.section(f"{total} skipped, by the part that is missing", sep="-")
    for (what, how, require), tests in sorted(groups.items(), key=lambda g: -len(g[1])):
        also = f"; {require}=1 makes them fail instead" if require else ""
        terminalreporter.write_line(f"{what} ({len(tests)} tests): install with: {how}{also}")
        reasons: dict[str, list[str]] = defaultdict(list)
        for nodeid, reason in tests:
            reasons[reason].append(nodeid.split("::")[0])
        for reason, files in reasons.items():
            shown = ", ".join(sorted(set(files)))
            terminalreporter.write_line(f"    {len(files)} in {shown}: {reason}")
