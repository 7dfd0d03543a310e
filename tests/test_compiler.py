"""The world compiler on the reviews application (tests/compile_sources/reviews: how it runs, its schema, its
OpenAPI document and its three policies; none of the hand-written scenarios): the application runs as local
processes on a private PostgreSQL server, on 127.0.0.1, with nothing mocked.

Skipped without the PostgreSQL server binaries (a failure under REHEARSAL_REQUIRE_POSTGRES=1) or without the
application's driver (``pip install -e ".[compile]"``; a failure under REHEARSAL_REQUIRE_COMPILE=1).
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
    """Skip without the server binaries (a failure under REHEARSAL_REQUIRE_POSTGRES=1) or without the reviews
    application's own driver, the ``compile`` extra (a failure under REHEARSAL_REQUIRE_COMPILE=1)."""
    from rehearsal_env.backends._pgserver import PostgresUnavailable, find_binaries

    try:
        find_binaries()
    except PostgresUnavailable as exc:
        if os.environ.get("REHEARSAL_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_POSTGRES=1 but {exc}")
        pytest.skip(str(exc))
    try:
        import psycopg2  # noqa: F401  (the reviews application's own driver)
    except ImportError:
        if os.environ.get("REHEARSAL_REQUIRE_COMPILE") == "1":
            pytest.fail("REHEARSAL_REQUIRE_COMPILE=1 but psycopg2 is not installed")
        pytest.skip("the compile extra: the reviews application's driver psycopg2 is missing; install with "
                    "pip install -e '.[compile]'")


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
    roles = {r.name: set(r.tools) for r in world.roles}  # permissions by evidence: the service refuses the triager
    assert "merge_pull_request" in roles["maintainer"] and not any("merge" in t for t in roles["triager"])
    assert {"triager_post_comment", "triager_add_label", "triager_request_review"} <= roles["triager"]
    policy_rules = {r for p in world.policies for r in p.hard_rules}
    for s in scenarios:
        assert policy_rules <= {c.name for c in s.hard_rules}, s.id
        assert any(w.name == "wrong:claim-done" for w in s.wrong)
    repeats = [s for s in scenarios if any(w.name == "wrong:repeat-write" for w in s.wrong)]
    assert repeats and all(s.offers_retry for s in repeats)  # the write's outcome is unknown; a retry is offered
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


def test_an_edited_phase_result_reruns_what_follows(compiled: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "temp"  # this process's temporary folder: the application's logs and home while it runs
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    out = tmp_path / "edited"
    shutil.copytree(compiled.folder.parent, out)
    adapt = out / ".compile" / "06-adapt.json"
    body = json.loads(adapt.read_text())
    body["roles"][0]["description"] = "Edited by a person."
    adapt.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    result = compile_world(REVIEWS, out, describe=DESCRIBE)
    assert set(result.skipped) == {"plan", "materialize", "discover", "seed", "adapt"}  # the rest ran again
    assert "Edited by a person." in (out / "world" / "world.toml").read_text()
    assert not list(temp.iterdir()), "the application's log folder outlived the compile"


def _kill_in(phase: str, src: Path, out: Path, up: Any) -> int:
    """Start `rehearsal world compile SRC --out OUT` in a child process and SIGKILL it in ``phase``, once the phase
    before it is written and ``up(pid)`` says the phase's application runs; the child's pid."""
    before = PHASES[PHASES.index(phase) - 1]
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from rehearsal_env.cli import main; sys.exit(main(sys.argv[1:]))",
         "world", "compile", str(src), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    done = out / ".compile" / f"{PHASES.index(before) + 1:02d}-{before}.json"
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    while not up(proc.pid) and time.monotonic() < deadline:  # the phase's application is up
        time.sleep(0.02)
    assert up(proc.pid), f"the compile never reached {phase}'s application"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return proc.pid


@pytest.mark.parametrize("phase", ["materialize", "author", "validate"])
def test_a_compile_killed_in_a_phase_leaves_nothing_running_and_resumes_there(compiled: Any, tmp_path: Path,
                                                                              phase: str) -> None:
    src = _source(tmp_path, _runtime("local"))
    out = tmp_path / "killed"
    _kill_in(phase, src, out, lambda pid: bool(app_processes(out)))
    deadline = time.monotonic() + 10
    while app_processes(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not app_processes(out), "the application outlived the killed compile"
    result = compile_world(src, out)
    assert set(PHASES[1:PHASES.index(phase)]) <= set(result.skipped)  # it resumed at the killed phase
    assert result.summary["world_version"] == compiled.summary["world_version"]


def _require_docker() -> None:
    from rehearsal_env.compiler import docker_available

    if not docker_available():
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail("REHEARSAL_REQUIRE_DOCKER=1 but no Docker daemon answers")
        pytest.skip("no Docker daemon answers: the compile's sandbox runtime needs one")


def _runtime(runtime: str) -> Any:
    return lambda t: t.replace('probe = "/repos"', f'probe = "/repos"\nruntime = "{runtime}"')


def test_the_sandbox_and_local_processes_compile_the_same_folder(compiled: Any, tmp_path: Path) -> None:
    """``[application] runtime``: compiled in the Docker sandbox (its container built from the world folder, its
    own PostgreSQL container and network) and as local processes, the world folder is the same file for file, so
    its version is too; the sandbox's containers and network are gone after."""
    from rehearsal_env.sandbox import ours_left

    _require()
    _require_docker()

    def files(folder: Path) -> dict[Path, bytes]:
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    ran = compiled.phases["plan"]["runtime"]  # the sandbox here (auto, a daemon answers) unless it said otherwise
    other = compile_world(_source(tmp_path, _runtime("local" if ran == "docker-sandbox" else "docker")),
                          tmp_path / "out")
    assert {ran, other.phases["plan"]["runtime"]} == {"docker-sandbox", "local-process"}
    assert files(other.folder) == files(compiled.folder)
    assert other.summary["world_version"] == compiled.summary["world_version"]
    assert not ours_left()


def test_an_application_that_exits_in_the_sandbox_is_one_line_and_leaves_no_container(tmp_path: Path) -> None:
    from rehearsal_env.sandbox import ours_left

    _require()
    _require_docker()
    exits = BAD["exits"][0]
    assert exits is not None
    src = _source(tmp_path, lambda t: _runtime("docker")(exits(t)))
    with pytest.raises(CompileError) as caught:
        compile_world(src, tmp_path / "out")
    message = str(caught.value)
    assert message.startswith("compile phase materialize: expected the application to start in the Docker sandbox")
    assert "exited with status 3" in message and "\n" not in message and not ours_left()


def test_a_compile_killed_in_the_sandbox_leaves_no_container_and_resumes(compiled: Any, tmp_path: Path) -> None:
    """Killed (SIGKILL) in the validate phase on the Docker sandbox: its containers and network are removed (the
    sandbox's reaper), and the compile resumes at that phase, starting a sandbox of its own."""
    import socket

    import docker  # type: ignore[import-untyped]

    from rehearsal_env.sandbox import LABEL

    _require()
    _require_docker()
    client = docker.from_env()

    def left(pid: int) -> list[str]:
        mine = {"label": [LABEL, f"rehearsal.owner={socket.gethostname()}-{pid}"]}
        return [c.name for c in client.containers.list(all=True, filters=mine)] + \
            [n.name for n in client.networks.list(filters=mine)]

    src, out = _source(tmp_path, _runtime("docker")), tmp_path / "killed"
    pid = _kill_in("validate", src, out, lambda pid: bool(left(pid)))
    deadline = time.monotonic() + 60
    while left(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left(pid), "the killed compile's sandbox outlived it"
    result = compile_world(src, out)
    assert set(PHASES[1:PHASES.index("validate")]) <= set(result.skipped)
    assert result.summary["world_version"] == compiled.summary["world_version"]


def test_a_compile_stopped_after_each_phase_resumes_at_the_next(compiled: Any, tmp_path: Path) -> None:
    out = tmp_path / "steps"
    for i, phase in enumerate(PHASES):
        result = compile_world(REVIEWS, out, describe=DESCRIBE, stop_after=phase)
        assert result.skipped == PHASES[1:i]  # inspect looks at the source again; the rest ran once
        assert list(result.phases) == list(PHASES[:i + 1])
        assert not app_processes(out)
    assert result.summary["world_version"] == compiled.summary["world_version"]


def test_the_compiled_folder_publishes_on_the_docker_sandbox_as_it_is(compiled: Any, tmp_path: Path) -> None:
    """The existing `rehearsal world build`, on the sandbox: the same jobs pass, and the version id is the same."""
    from rehearsal_env.compiler import docker_available
    from rehearsal_env.versions import build_and_publish

    if not docker_available():
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail("REHEARSAL_REQUIRE_DOCKER=1 but no Docker daemon answers")
        pytest.skip("no Docker daemon answers: the sandbox build of the compiled world needs one")
    built = build_and_publish(load_world_folder(compiled.folder), tmp_path / "versions")
    assert built.version.id == compiled.summary["world_version"]
    assert len(built.version.scenarios) == compiled.summary["jobs"] and not built.version.kept_out


def test_data_given_as_sql_compiles_to_the_same_version(compiled: Any, tmp_path: Path) -> None:
    """The seed phase writes the generator's rows as seed.sql; a source giving that SQL instead compiles alike."""
    src = _source(tmp_path, lambda t: t.replace('generator = "data.py"', 'sql = "seed.sql"'))
    shutil.copy(compiled.folder / "seed.sql", src / "seed.sql")
    (src / "data.py").unlink()
    result = compile_world(src, tmp_path / "out")
    assert result.phases["seed"]["from"] == "sql"
    assert result.summary["world_version"] == compiled.summary["world_version"]


def test_data_through_the_applications_own_api(compiled: Any, tmp_path: Path) -> None:
    """``[data] api = 40``: on the generator's rows, 40 adding writes sent through the application's API as its
    actors; what it kept (with the rows the application made itself: its notifications) is the world's seed, no
    stated policy broken in it, and a second compile writes the same bytes."""
    from rehearsal_env.backends import open_database

    src = _source(tmp_path, lambda t: t.replace('generator = "data.py"', 'generator = "data.py"\napi = 40'))
    first = compile_world(src, tmp_path / "a")
    seed = first.phases["seed"]
    api = seed["api"]
    assert seed["from"] == "generator" and api["sent"] == 40 and api["kept"] >= 20, api
    # adding writes only (each takes a body): never an action such as merge or close
    assert len(api["kept_by_operation"]) >= 3
    assert set(api["kept_by_operation"]) <= {"post_comment", "add_label", "submit_review", "request_review"}, api
    assert {w["role"] for w in api["writes"]} == {"maintainer", "triager"}
    before, after = seed["rows_before_api"], seed["rows"]
    assert after["comments"] > before["comments"] and after["notifications"] > before["notifications"] == 0
    world = load_world_folder(first.folder)
    db = open_database(world, "sqlite")
    try:
        for policy in first.phases["adapt"]["policy_rules"]:
            assert db.check_value(policy["sql"]) == policy["want"], policy["name"]
    finally:
        db.close()
    assert first.summary["jobs"] >= 30 and not first.summary["kept_out"]
    second = compile_world(src, tmp_path / "b")
    assert (tmp_path / "b" / "world" / "seed.sql").read_bytes() == (first.folder / "seed.sql").read_bytes()
    assert second.summary["world_version"] == first.summary["world_version"] != compiled.summary["world_version"]


# --- bad input: one line naming the phase, nothing left running, the phases done so far kept ---------------------
def _source(tmp_path: Path, edit: Any = None) -> Path:
    src = tmp_path / "src"
    shutil.copytree(REVIEWS / "app", src / "app")
    shutil.copy(REVIEWS / "data.py", src / "data.py")
    for name in ("schema.sql", "openapi.json"):
        shutil.copy(DESCRIBE.parent / name, src / name)
    text = DESCRIBE.read_text()
    (src / "rehearsal-app.toml").write_text(edit(text) if edit else text)
    return src


BAD = {
    "exits": (lambda t: t.replace('command = ["{python}", "{app}/server.py"]',
                                  'command = ["{python}", "-c", "import sys; sys.exit(3)"]'),
              None, "materialize", "exited with status 3"),
    "never-healthy": (lambda t: t.replace('health = "/health"', 'health = "/nope"\nstart_timeout_s = 2'),
                      None, "materialize", "never became healthy"),
    "malformed-openapi": (None, "{not json", "discover", "expected the OpenAPI document as JSON"),
    "huge-openapi": (None, json.dumps({"paths": {}, "pad": "x" * 3_000_000}), "discover", "at most 2,097,152 bytes"),
    "no-database": (lambda t: t.replace('sql = ["schema.sql"]', ""), None, "discover",
                    "expected the application's tables in its database"),
    "path-out": (lambda t: t.replace('folder = "app"', 'folder = "../../etc"'), None, "inspect",
                 "resolves outside its folder"),
    "probe-elsewhere": (lambda t: t.replace('probe = "/repos"', 'probe = "//evil.example/x"'), None, "inspect",
                        "expected [application] probe as a path on the application"),
    "bad-name": (lambda t: t.replace('name = "reviews-compiled"', 'name = "../Reviews"'), None, "inspect",
                 "expected name as a world name"),
    "api-not-a-number": (lambda t: t.replace('generator = "data.py"', 'generator = "data.py"\napi = "many"'), None,
                         "inspect", "expected [data] api as the number of writes"),
    "api-on-nothing": (lambda t: t.replace('generator = "data.py"', "api = 10"), None, "seed",
                       "expected the application to accept some of the 10 writes"),
    "no-command": (lambda t: t.replace('command = ["{python}", "{app}/server.py"]', ""), None, "inspect",
                   "expected [application] with a command"),
}


def test_out_inside_the_application_is_refused(tmp_path: Path) -> None:
    src = _source(tmp_path)
    with pytest.raises(CompileError, match="compile phase inspect: expected --out outside the application's folder"):
        compile_world(src, src / "app" / "build")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_the_phase(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    from rehearsal_env.cli import main

    if case not in ("path-out", "no-command", "probe-elsewhere", "bad-name", "api-not-a-number"):
        _require()
    edit, openapi, phase, words = BAD[case]
    src = _source(tmp_path, lambda t: _runtime("local")(edit(t) if edit else t))  # the local processes' words
    if openapi is not None:
        (src / "openapi.json").write_text(openapi)
    out = tmp_path / "out"
    assert main(["world", "compile", str(src), "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # progress lines, then the error on one line
    errors = [line for line in lines if line.startswith("rehearsal: error")]
    assert errors == lines[-1:] and errors[0].startswith(f"rehearsal: error: compile phase {phase}: "), lines
    assert words in errors[0], errors
    assert not app_processes(out)
    done = PHASES[:PHASES.index(phase)]
    assert all((out / ".compile" / f"{PHASES.index(p) + 1:02d}-{p}.json").is_file() for p in done)
    with pytest.raises(CompileError):  # the same error from the API, as a CompileError
        compile_world(src, out)
