"""The sandbox holds: from inside the application container the host is unreachable, the container is bounded,
the application's database role is not the superuser, and an application crashed by an agent's input is the
agent's tool error while the world heals.

Needs a Docker daemon, the sandbox base image (``python -m rehearsal_env.sandbox``) and root with iptables on
this machine (the sandbox installs its host rule; see docs/worlds-from-folders-and-sandbox.md). Skips without
Docker or the image unless REHEARSAL_REQUIRE_DOCKER=1, which makes that a failure. Every attack runs as the
application runs: ``docker exec`` into its container takes the container's user, capabilities and cgroup.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import open_database
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import run_episode
from rehearsal_env.sandbox import SandboxDatabase
from rehearsal_env.verdict import NotScoredCause, Outcome
from rehearsal_env.worlds import World, application_of, load_world

REPO = Path(__file__).resolve().parent.parent


def _require_docker() -> None:
    import os

    from rehearsal_env.sandbox import base_image_built, docker_available

    why = docker_available()
    if why is None and not base_image_built():
        why = "the sandbox base image is not built; build it with `python -m rehearsal_env.sandbox`"
    if why is not None:
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def reviews() -> World:
    return load_world("reviews")


@pytest.fixture(scope="module")
def sandbox(reviews: World) -> Iterator[SandboxDatabase]:
    _require_docker()
    from rehearsal_env.sandbox import ours_left

    db = open_database(reviews, "docker")
    assert isinstance(db, SandboxDatabase)
    rule = f"rehearsal-sandbox {db.sandbox.network.id[:12]}"  # its own: a parallel worker's sandbox has another
    try:
        yield db
    finally:
        db.close()
    assert ours_left() == [], f"the sandbox left these behind: {ours_left()}"
    assert rule not in _rules(), "the sandbox left its host rule behind"


def _rules() -> str:
    out = ""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool):
            out += subprocess.run([tool, "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
    return out


def _in_app(db: SandboxDatabase, script: str, *args: str) -> tuple[int, str]:
    """Run a Python script in the application's container, as the application runs (its user and limits)."""
    return db.sandbox.exec("app", ["python3", "-c", script, *args])


def _works(reviews: World, db: SandboxDatabase) -> None:
    """The env still works: a reset, then a reference episode is verified."""
    db.reset()
    scenario = reviews.scenario("comment-once-atlas-04")
    verdict = run_episode(RehearsalEnv(scenario, reviews, database=db), make_agent("reference", scenario)).verdict
    assert verdict.outcome is Outcome.VERIFIED, verdict


# -- the host ---------------------------------------------------------------------------------------------------
def _host_addresses() -> list[str]:
    """Every address of every interface of this machine (IPv6 link-local ones scoped to the container's eth0)."""
    found = json.loads(subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    out = []
    for interface in found:
        for info in interface.get("addr_info", []):
            address = info["local"]
            if address.startswith("127.") or address == "::1":
                continue  # the container's own loopback, not the host's
            out.append(f"{address}%eth0" if address.startswith("fe80:") else address)
    return out


def _listening_ports() -> set[int]:
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(name).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


_PROBE = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
targets = json.loads(sys.argv[1])
def attempt(t):
    host, port = t
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        info = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0]
        s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(1.5)
        s.connect(info[4]); s.close(); return f"{host} {port}"
    except OSError:
        return None
with ThreadPoolExecutor(64) as pool:
    print(json.dumps([r for r in pool.map(attempt, targets) if r]))
"""


class _Listener:
    """A TCP listener of this test on every host address (0.0.0.0 or ::), accepting until closed."""

    def __init__(self, family: socket.AddressFamily) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()


def test_no_host_port_answers_the_application_on_any_host_address(sandbox: SandboxDatabase) -> None:
    listeners = [_Listener(socket.AF_INET), _Listener(socket.AF_INET6)]
    try:
        gateway = sandbox.sandbox.gateway()
        with socket.create_connection((gateway, listeners[0].port), timeout=2):
            pass  # the driver reaches our listener at the bridge's gateway: it listens there
        ports = _listening_ports()
        assert {listeners[0].port, listeners[1].port} <= ports
        addresses = sorted(set(_host_addresses()) | {gateway})
        targets = [[address, port] for address in addresses for port in sorted(ports)]
        code, out = _in_app(sandbox, _PROBE, json.dumps(targets))
        assert code == 0, out
        assert json.loads(out.strip().splitlines()[-1]) == [], f"the application reached the host: {out}"
        # the probe itself works: the application's own port answers it inside its container
        app = application_of(sandbox.world)
        assert app is not None
        code, out = _in_app(sandbox, _PROBE, json.dumps([["127.0.0.1", app.port]]))
        assert json.loads(out.strip().splitlines()[-1]) == [f"127.0.0.1 {app.port}"], out
    finally:
        for listener in listeners:
            listener.sock.close()


def test_the_world_page_measures_the_host_and_says_what_it_tried(sandbox: SandboxDatabase) -> None:
    facts = {f.name: f for f in sandbox.isolation_facts()}
    host = facts["host"]
    assert host.holds, host.detail
    assert "listening TCP port" in host.detail and "bridge gateway" in host.detail, host.detail


def test_without_iptables_the_sandbox_does_not_start_and_says_how_to_fix_it(
        reviews: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _require_docker()
    from rehearsal_env.sandbox import SandboxFailed, ours_left

    before = set(ours_left())  # this process's (a parallel worker's sandboxes come and go meanwhile)
    monkeypatch.setenv("PATH", str(tmp_path))  # this machine without iptables
    with pytest.raises(SandboxFailed) as failed:
        open_database(reviews, "docker")
    message = str(failed.value)
    assert "\n" not in message and "iptables is not installed" in message, message
    assert "apt-get install iptables" in message and "REHEARSAL_SANDBOX_HOST_OPEN=1" in message, message
    assert set(ours_left()) <= before  # its network went with it


_OWNER = """
import sys
from rehearsal_env.backends import open_database
from rehearsal_env.worlds import load_world
db = open_database(load_world("reviews"), "docker")
print(db.sandbox.network.id, flush=True)
sys.stdin.read()
"""


def test_an_owner_killed_without_exit_handlers_leaves_no_host_rule(reviews: World) -> None:
    """SIGKILL: no atexit, no close(); the reaper removes the containers, the network and its host rule."""
    _require_docker()
    import sys
    import time

    from rehearsal_env.sandbox._docker import docker_client
    from rehearsal_env.sandbox._hostguard import guarded_networks

    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=REPO)
    try:
        assert owner.stdout is not None
        network = owner.stdout.readline().strip()
        assert network and network[:12] in guarded_networks()
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 60
    while network[:12] in guarded_networks() or any(n.id == network for n in docker_client().networks.list()):
        assert time.monotonic() < deadline, "the reaper did not remove the killed owner's network and host rule"
        time.sleep(0.5)


def test_a_sandbox_opened_without_the_host_rule_is_measured_as_reaching_the_host(
        reviews: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The opt-out exists, and the world page's measurement is not vacuous: without the rule it sees the host."""
    _require_docker()
    from rehearsal_env.sandbox._hostguard import guarded_networks

    monkeypatch.setenv("REHEARSAL_SANDBOX_HOST_OPEN", "1")
    db = open_database(reviews, "docker")
    assert isinstance(db, SandboxDatabase)
    try:
        assert db.sandbox.network.id[:12] not in guarded_networks()
        host = next(f for f in db.isolation_facts() if f.name == "host")
        assert not host.holds and "answered" in host.detail and "reachable" in host.detail, host.detail
    finally:
        db.close()


# -- limits ---------------------------------------------------------------------------------------------------
def test_the_application_runs_unprivileged_and_read_only(sandbox: SandboxDatabase) -> None:
    script = ("import os\nst = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() "
              "if ':\\t' in l)\nprint(os.getuid(), st['CapEff'].strip(), st['CapBnd'].strip(), "
              "st['NoNewPrivs'].strip())\n"
              "for p in ('/app/x', '/etc/x', '/var/tmp/x', '/x'):\n"
              " try:\n  open(p, 'w').write('x'); print('wrote', p)\n except OSError as e:\n  print('refused', p)\n")
    code, out = _in_app(sandbox, script)
    assert code == 0, out
    uid, eff, bnd, nnp = out.splitlines()[0].split()
    assert uid != "0" and int(eff, 16) == 0 and int(bnd, 16) == 0 and nnp == "1", out
    assert "wrote" not in out, out
    host_config = sandbox.sandbox.containers["app"].container.attrs["HostConfig"]
    assert host_config["ReadonlyRootfs"] and host_config["CapDrop"] == ["ALL"]
    assert host_config["LogConfig"]["Config"]["max-size"]  # what it prints is bounded on the host's disk


def test_a_fork_bomb_is_stopped_by_the_pid_limit(reviews: World, sandbox: SandboxDatabase) -> None:
    app = application_of(reviews)
    assert app is not None
    attempts = app.limits.pids * 4
    script = f"""
import os, signal, time
children, refused = [], None
for _ in range({attempts}):
    try:
        pid = os.fork()
    except OSError as exc:
        refused = exc.errno; break
    if pid == 0:
        signal.pause(); os._exit(0)
    children.append(pid)
print(len(children), refused)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
"""
    code, out = _in_app(sandbox, script)
    forked, refused = out.split()[-2:]
    assert refused != "None" and int(forked) < app.limits.pids, out
    _works(reviews, sandbox)


def test_a_fork_bomb_that_holds_its_processes_stays_within_the_limit_and_the_env_works(
        reviews: World, sandbox: SandboxDatabase) -> None:
    """Every pid of the container taken and kept: the container holds no more than its limit, the host is
    unaffected, and the env still works (over its kept-alive connection, or after restarting the application)."""
    import time

    app = application_of(reviews)
    assert app is not None
    container = sandbox.sandbox.containers["app"].container
    bomb = "import os, signal\nwhile True:\n try:\n  os.fork()\n except OSError:\n  signal.pause()\n"
    container.exec_run(["python3", "-c", bomb], detach=True)
    deadline = time.monotonic() + 20
    while (held := int(container.stats(stream=False)["pids_stats"]["current"])) < app.limits.pids - 8:
        assert time.monotonic() < deadline, f"the bomb only reached {held} processes"
        time.sleep(0.2)
    assert held <= app.limits.pids
    _works(reviews, sandbox)
    container.kill()  # ends the bomb with the application: the next reset restarts it
    _works(reviews, sandbox)


def test_an_application_or_emulator_killed_between_episodes_is_restarted_by_the_next_reset(
        reviews: World, sandbox: SandboxDatabase) -> None:
    restarts = sandbox.restarts
    sandbox.sandbox.containers["app"].container.kill()
    _works(reviews, sandbox)  # the reset's probe gets no answer: the application is restarted
    assert sandbox.restarts == restarts + 1
    sandbox.sandbox.containers["emulator"].container.kill()
    scenario = reviews.scenario("comment-once-atlas-04")
    env = RehearsalEnv(scenario, reviews, database=sandbox, stress=False)
    env.reset(seed=0)
    result, _ = _step(env, "post_comment", repo="atlas", number=4, body="hello")  # the mail service is gone
    assert result["status"] == "error", result
    _works(reviews, sandbox)  # the next reset restarts the emulator


def test_a_memory_bomb_is_stopped_by_the_memory_limit(reviews: World, sandbox: SandboxDatabase) -> None:
    app = application_of(reviews)
    assert app is not None
    mib = app.limits.memory_mb * 3
    code, out = _in_app(sandbox, f"b = bytearray(b'x') * ({mib} << 20); print('allocated', len(b))")
    assert "allocated" not in out and code in (137, 1), (code, out)  # OOM-killed (137) or MemoryError
    _works(reviews, sandbox)


def test_a_disk_fill_is_stopped_by_the_bounded_tmpfs(reviews: World, sandbox: SandboxDatabase) -> None:
    app = application_of(reviews)
    assert app is not None
    chunks = app.limits.tmpfs_mb * 4
    script = f"""
import errno, os
written, failed = 0, None
try:
    with open('/tmp/fill', 'wb') as f:
        for _ in range({chunks}):
            f.write(b'x' * (1 << 20)); f.flush(); written += 1
except OSError as exc:
    failed = errno.errorcode.get(exc.errno)
os.remove('/tmp/fill')
print(written, failed)
"""
    code, out = _in_app(sandbox, script)
    written, failed = out.split()[-2:]
    assert failed == "ENOSPC" and int(written) <= app.limits.tmpfs_mb, out
    _works(reviews, sandbox)


# -- the application's database role ----------------------------------------------------------------------------
_ROLE = r"""
import os, psycopg2
dsn = os.environ['REVIEWS_DSN']
c = psycopg2.connect(dsn); c.autocommit = True; cur = c.cursor()
cur.execute("SELECT current_user, current_setting('is_superuser'), "
            "pg_has_role(current_user, 'pg_execute_server_program', 'member'), "
            "pg_has_role(current_user, 'rehearsal_checker', 'member')")
print('role', *cur.fetchone())
cur.execute("SELECT DISTINCT tableowner = current_user FROM pg_tables WHERE schemaname = 'public'")
print('owns', *sorted(r[0] for r in cur.fetchall()))
for attempt in ("COPY (SELECT 1) TO PROGRAM 'id'", "CREATE ROLE intruder", "SELECT * FROM rehearsal.snap_users",
                "CREATE TABLE public.extra (x int)", "SELECT pg_read_file('/etc/passwd')",
                "ALTER ROLE current_user SUPERUSER", "SELECT rehearsal.restore()"):
    try:
        cur.execute(attempt); print('ran', attempt)
    except psycopg2.Error as exc:
        print('refused', type(exc).__name__)
try:
    psycopg2.connect(dsn + ' dbname=postgres').close(); print('ran connect postgres')
except psycopg2.Error:
    print('refused connect')
"""


def test_the_application_role_owns_its_tables_and_nothing_else(sandbox: SandboxDatabase) -> None:
    code, out = _in_app(sandbox, _ROLE)
    assert code == 0, out
    role = next(line.split() for line in out.splitlines() if line.startswith("role"))
    assert role[1] != "postgres" and role[2:] == ["off", "False", "False"], out
    assert "owns True" in out.splitlines(), out
    assert "ran" not in out, out
    assert role[1] != sandbox.database_name  # the check role is the env database's reader, another role


# -- a crash on agent input -------------------------------------------------------------------------------------
_CRASHING = '''
        if b"CRASH-NOW" in raw:
            os._exit(3)  # a defect of the world's code, tripped by an agent's input
        if b"EAT-MEMORY" in raw:
            hoard = bytearray(b"x") * (3 << 30)  # noqa: F841
'''


def _crashy_world(tmp_path: Path) -> World:
    folder = tmp_path / "reviews"
    shutil.copytree(REPO / "worlds" / "reviews", folder)
    server = folder / "app" / "server.py"
    text = server.read_text()
    anchor = '        raw = self.rfile.read(length) if length else b""\n'
    assert anchor in text
    server.write_text(text.replace(anchor, anchor + _CRASHING.lstrip("\n")))
    toml = folder / "world.toml"  # a reset hook too: a reset asks the application before it verifies
    toml.write_text(toml.read_text().replace('probe = "/repos"\n', 'probe = "/repos"\nreset_hook = "GET /health"\n', 1))
    return load_world(str(folder))


@pytest.mark.parametrize(("table", "problem"), [
    ("pids = 100\nmemory_mb = 256\ncpus = 0.5", None),
    ("pids = 5", "[application.limits] pids = 5 is not a whole number from 16 to 32768"),
    ("memory_mb = \"lots\"", "[application.limits] memory_mb = 'lots' is not a whole number"),
    ("swap_mb = 10", "[application.limits] has no field 'swap_mb'"),
])
def test_a_world_declares_its_limits(tmp_path: Path, table: str, problem: str | None) -> None:
    """No Docker needed: what [application.limits] accepts (absent fields keep their defaults)."""
    from rehearsal_env.worlds import ApplicationLimits, WorldFolderError

    folder = tmp_path / "reviews"
    shutil.copytree(REPO / "worlds" / "reviews", folder)
    with (folder / "world.toml").open("a") as f:
        f.write(f"\n[application.limits]\n{table}\n")
    if problem is not None:
        with pytest.raises(WorldFolderError) as refused:
            load_world(str(folder))
        assert problem in str(refused.value) and "Fix:" in str(refused.value), refused.value
        return
    app = application_of(load_world(str(folder)))
    assert app is not None and app.limits == ApplicationLimits(memory_mb=256, pids=100, cpus=0.5)


def _step(env: RehearsalEnv, tool: str, **args: Any) -> tuple[dict[str, Any], bool]:
    observation, _, terminated, _, _ = env.step(json.dumps({"tool": tool, "args": args}))
    return json.loads(observation)["tool_result"], terminated


def test_an_application_crashed_by_the_agent_is_its_tool_error_and_the_world_heals(tmp_path: Path) -> None:
    _require_docker()
    world = _crashy_world(tmp_path)
    db = open_database(world, "docker")
    assert isinstance(db, SandboxDatabase)
    try:
        scenario = world.scenario("comment-once-atlas-04")
        env = RehearsalEnv(scenario, world, database=db, stress=False)  # no injected faults: only the crash
        env.reset(seed=0)
        for poison in ("CRASH-NOW", "EAT-MEMORY"):
            result, terminated = _step(env, "post_comment", repo="atlas", number=4, body=poison)
            assert result["status"] == "error" and not terminated, result
            assert env.episode.tool_crashes, result
            assert env.episode.tool_crashes[-1].tool == "post_comment"
            result, terminated = _step(env, "get_pull_request", repo="atlas", number=4)  # the episode goes on
            assert result["status"] == "ok" and not terminated, result
        assert len(env.episode.tool_crashes) == 2 and db.restarts == 2
        db.sandbox.containers["app"].container.kill()  # dead before the next reset: its hook restarts it
        env.reset(seed=0)
        assert db.restarts == 3
        verdict = run_episode(env, make_agent("reference", scenario)).verdict
        assert verdict.outcome is Outcome.VERIFIED, verdict
    finally:
        db.close()


def test_an_application_that_cannot_be_brought_back_is_not_scored_for_the_sandbox(reviews: World) -> None:
    _require_docker()
    db = open_database(reviews, "docker")
    assert isinstance(db, SandboxDatabase)
    try:
        scenario = reviews.scenarios("dev")[0]
        env = RehearsalEnv(scenario, reviews, database=db)
        observation, info = env.reset(seed=0)
        action = make_agent("reference", scenario)(observation, info)
        db.sandbox.containers["app"].container.remove(force=True)  # gone: nothing to restart
        *_, terminated, _, info = env.step(action)
        verdict = info.get("verdict")
        assert terminated and verdict is not None and verdict.outcome is Outcome.NOT_SCORED, info
        assert verdict.cause is NotScoredCause.SANDBOX, verdict.reason
    finally:
        db.close()
