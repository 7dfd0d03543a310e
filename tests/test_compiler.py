"""The world compiler on the reviews application (tests/compile_sources/reviews: how it runs, its schema, its
OpenAPI document and its three policies; none of the hand-written scenarios): the application runs as local
processes on a private PostgreSQL server, on 127.0.0.1, with nothing mocked.

Skipped without the PostgreSQL server binaries or the application's driver (``pip install -e ".[compile]"``);
a failure instead under REHEARSAL_REQUIRE_POSTGRES=1.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.compiler import PHASES, CompileError, compile_world
from rehearsal_env.worlds import load_world_folder

ROOT = Path(__file__).resolve().parents[1]
REVIEWS = ROOT / "worlds" / "reviews"
DESCRIBE = ROOT / "tests" / "compile_sources" / "reviews" / "app.toml"


def _require() -> None:
    from rehearsal_env.backends._pgserver import PostgresUnavailable, find_binaries

    try:
        find_binaries()
        import psycopg2  # noqa: F401  (the reviews application's own driver)
    except (PostgresUnavailable, ImportError) as exc:
        if os.environ.get("REHEARSAL_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_POSTGRES=1 but {exc}")
        pytest.skip(f"the compile needs the PostgreSQL server binaries and psycopg2 (pip install -e '.[compile]'): "
                    f"{exc}")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    _require()
    out = tmp_path_factory.mktemp("compile") / "reviews"
    return compile_world(REVIEWS, out, describe=DESCRIBE)


def app_processes(out: Path) -> list[int]:
    """Processes whose command line names a file under ``out`` (the compiled application's server)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(out) in cmdline and "server.py" in cmdline:
            found.append(int(proc.name))
    return found


def test_reviews_compiles_to_validated_jobs(compiled: Any) -> None:
    summary = compiled.summary
    assert summary["jobs"] >= 30, summary
    assert len(summary["kinds_of_write"]) >= 5, summary
    assert all(summary["splits"][s] > 0 for s in ("train", "dev", "holdout")), summary
    world = load_world_folder(compiled.folder)  # the ordinary folder loader reads it
    scenarios = world.scenarios()
    assert len(scenarios) == summary["jobs"]
    assert len(world.policies) == 3
    policy_rules = {r for p in world.policies for r in p.hard_rules}
    for s in scenarios:
        assert policy_rules <= {c.name for c in s.hard_rules}, s.id
        assert any(w.name == "wrong:claim-done" for w in s.wrong)
    assert any(w.name == "wrong:repeat-write" for s in scenarios for w in s.wrong)
    assert any(w.name == "wrong:first-step-only" for s in scenarios for w in s.wrong)
    page = (compiled.folder / "COMPILE.md").read_text()
    assert f"**{summary['jobs']} jobs validated**" in page and "A replay gives the same result" in page
    assert summary["world_version"].startswith("wv_")
    assert not app_processes(compiled.folder.parent)


def test_a_second_compile_is_byte_identical_and_a_third_resumes(compiled: Any, tmp_path: Path) -> None:
    again = compile_world(REVIEWS, tmp_path / "again", describe=DESCRIBE)
    cmp = filecmp.dircmp(compiled.folder, again.folder)

    def same(d: filecmp.dircmp[str]) -> bool:
        return not d.diff_files and not d.left_only and not d.right_only and all(same(s) for s in d.subdirs.values())

    assert same(cmp)
    assert again.summary["world_version"] == compiled.summary["world_version"]
    third = compile_world(REVIEWS, tmp_path / "again", describe=DESCRIBE)
    assert third.skipped == PHASES[1:]  # inspect always looks at the source again; nothing else reran


def test_an_edited_phase_result_reruns_what_follows(compiled: Any, tmp_path: Path) -> None:
    out = tmp_path / "edited"
    shutil.copytree(compiled.folder.parent, out)
    adapt = out / ".compile" / "06-adapt.json"
    body = json.loads(adapt.read_text())
    body["roles"][0]["description"] = "Edited by a person."
    adapt.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    result = compile_world(REVIEWS, out, describe=DESCRIBE)
    assert set(result.skipped) == {"plan", "materialize", "discover", "seed", "adapt"}  # the rest ran again
    assert "Edited by a person." in (out / "world" / "world.toml").read_text()


def test_a_killed_compile_leaves_nothing_running_and_resumes(compiled: Any, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from rehearsal_env.cli import main; sys.exit(main(sys.argv[1:]))",
         "world", "compile", str(REVIEWS), "--describe", str(DESCRIBE), "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out / ".compile" / "06-adapt.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    while not app_processes(out) and time.monotonic() < deadline:  # the author phase's application is up
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while app_processes(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not app_processes(out), "the application outlived the killed compile"
    result = compile_world(REVIEWS, out, describe=DESCRIBE)
    assert {"plan", "materialize", "discover", "seed", "adapt"} <= set(result.skipped)
    assert result.summary["world_version"] == compiled.summary["world_version"]
