"""A world folder's code (``[data] generator``) runs in a confined child process, and its answer is data.

The hostile generator below tries every way to the signing key it can think of (the state home by its
path, ``~``, the environment, ``/proc`` of its parent, inherited descriptors, sockets, new processes, a
walk of the disk) and writes what it found into its rows and into files; the tests assert that the
secrets appear nowhere: not in its rows, not in the world's database, not in any file it could reach.
The same probe with the confinement left out (``confine=False``) does find the key: the control that
shows the probe is real.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import uuid
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from rehearsal_env.backends import open_database
from rehearsal_env.identity import world_version
from rehearsal_env.worlds import WorldFolderError, add_world_folder, load_world_folder
from rehearsal_env.worlds._folder import _code
from rehearsal_env.worlds._folder._child import landlock_abi
from rehearsal_env.worlds._folder._code import TRUST_WORLD_CODE_ENV, run_world_code

REVIEWS = Path(__file__).resolve().parents[1] / "worlds" / "reviews"
KEY_SECRET = "SIGNINGKEY-7f3a9c1e-do-not-leak"
API_SECRET = "APIKEY-5b2d8e4f-do-not-leak"
ENV_SECRET = "ENVSECRET-91c4a7d2-do-not-leak"
SECRETS = (KEY_SECRET, API_SECRET, ENV_SECRET)
CONFINED = landlock_abi() >= 1 and sys.platform == "linux"

WORLD = """name = "loot"
description = "A world whose generator is hostile."
data_anchor = 2025-06-30
seed = 3

[[table]]
name = "loot"
columns = [{ name = "id", type = "int" }, { name = "probe" }, { name = "got" }]

[data]
generator = "data.py"
"""

HOSTILE = r'''
import glob, json, os, socket, subprocess

TARGETS = json.loads(%(targets)r)
EXFIL = json.loads(%(exfil)r)
WALK = json.loads(%(walk)r)
HOMES = json.loads(%(homes)r)
MAX_READ = 65536
MAX_WALK = 3000


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_READ).decode("utf-8", "replace")
    except BaseException as exc:
        return "refused: " + type(exc).__name__


def _try(what, fn):
    try:
        return str(fn())[:MAX_READ]
    except BaseException as exc:
        return "refused: " + type(exc).__name__


def rows(seed, anchor):
    got = []
    for path in TARGETS:                                            # the state home, by its known path, and ~
        got.append(("file " + path, _read(path)))
    for home in HOMES:
        got.append(("list " + home, _try("list", lambda: os.listdir(home))))
    got.append(("expanduser", _read(os.path.expanduser("~/.rehearsal/signing_key.pem"))))
    got.append(("environ", json.dumps(dict(os.environ))))           # the environment
    ppid = os.getppid()
    for part in ("environ", "cmdline", "maps", "status", "mem"):    # the parent's /proc
        got.append((f"/proc/{ppid}/{part}", _read(f"/proc/{ppid}/{part}")))
    got.append(("parent fds", _try("fds", lambda: os.listdir(f"/proc/{ppid}/fd"))))
    for fd in glob.glob(f"/proc/{ppid}/fd/*"):
        got.append(("parent fd " + fd, _read(fd)))
    for path in TARGETS:
        got.append(("via root " + path, _read(f"/proc/{ppid}/root{path}")))
        got.append(("via cwd " + path, _read(f"/proc/{ppid}/cwd/../" + os.path.basename(path))))
    got.append(("self environ", _read("/proc/self/environ")))
    for pid in _try("pids", lambda: os.listdir("/proc")).split("'"):  # every process's environment
        if pid.isdigit():
            got.append((f"/proc/{pid}/environ", _read(f"/proc/{pid}/environ")))
    for fd in range(3, 64):                                         # descriptors it may have inherited
        got.append((f"fd {fd}", _try("fd", lambda: os.read(fd, MAX_READ).decode("utf-8", "replace"))))
    got.append(("unix socket", _try("socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))))
    got.append(("tcp socket", _try("socket", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))))
    got.append(("fork", _try("fork", lambda: os.fork() or os._exit(0))))
    got.append(("cat", _try("cat", lambda: subprocess.run(["cat", *TARGETS], capture_output=True).stdout)))
    walked = 0
    for top in WALK:                                                # any file it can find
        for dirpath, dirnames, filenames in os.walk(top):
            for name in filenames[:MAX_WALK - walked]:
                walked += 1
                path = os.path.join(dirpath, name)
                text = _read(path)
                if not text.startswith("refused"):
                    got.append(("walk " + path, text))
    loot = "\n".join(f"{what}: {text}" for what, text in got)
    for path in EXFIL:                                              # and out, to every file it can write
        got.append(("write " + path, _try("write", lambda: open(path, "w").write(loot))))
    return {"loot": [(i + 1, what, text) for i, (what, text) in enumerate(got)]}
'''


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A state home and a ``~/.rehearsal`` holding known secrets, and secrets in the environment."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "signing_key.pem").write_text(f"-----BEGIN PRIVATE KEY-----\n{KEY_SECRET}\n-----END PRIVATE KEY-----\n")
    (home / "keys.json").write_text(json.dumps({"keys": [{"key": API_SECRET}]}))
    user = tmp_path / "user"
    (user / ".rehearsal").mkdir(parents=True)
    (user / ".rehearsal" / "signing_key.pem").write_text(KEY_SECRET)
    monkeypatch.setenv("REHEARSAL_HOME", str(home))
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    monkeypatch.setenv("REHEARSAL_SIGNING_KEY", ENV_SECRET)
    return {"home": home, "user": user}


def _hostile_world(tmp_path: Path, planted: dict[str, Path]) -> tuple[Path, list[Path]]:
    folder = tmp_path / "world"
    folder.mkdir()
    (folder / "world.toml").write_text(WORLD)
    home, user = planted["home"], planted["user"]
    targets = [home / "signing_key.pem", home / "keys.json", user / ".rehearsal" / "signing_key.pem",
               Path.home() / ".rehearsal" / "signing_key.pem"]
    exfil = [folder / "exfil.txt", home / "exfil.txt", user / "exfil.txt", tmp_path / "exfil.txt",
             Path("/tmp") / f"rehearsal-exfil-{uuid.uuid4().hex}.txt", Path("exfil.txt")]
    (folder / "data.py").write_text(HOSTILE % {
        "targets": json.dumps([str(t) for t in targets]), "exfil": json.dumps([str(p) for p in exfil]),
        "walk": json.dumps([str(tmp_path), "/tmp", str(user), "/etc"]),
        "homes": json.dumps([str(home), str(user), str(user / ".rehearsal")])})
    return folder, exfil


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _files_holding_secrets(roots: list[Path], planted: dict[str, Path]) -> list[str]:
    planted_files = {planted["home"] / "signing_key.pem", planted["home"] / "keys.json",
                     planted["user"] / ".rehearsal" / "signing_key.pem"}
    found = []
    for root in roots:
        for path in root.rglob("*") if root.is_dir() else [root]:
            if path.is_file() and path not in planted_files and _leaks(path.read_text(errors="replace")):
                found.append(str(path))
    return found


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_a_hostile_generator_reads_nothing_of_the_key(tmp_path: Path, planted: dict[str, Path]) -> None:
    folder, exfil = _hostile_world(tmp_path, planted)
    world = load_world_folder(folder)
    rows = world.seed_rows()
    probes = {what: got for _, what, got in rows["loot"]}
    assert _leaks(json.dumps(probes)) == []
    db = open_database(world)
    try:
        assert _leaks(json.dumps(db.query("SELECT * FROM loot"))) == []
    finally:
        db.close()
    assert _files_holding_secrets([tmp_path, *(p for p in exfil if p.is_absolute())], planted) == []
    assert not any(p.exists() for p in exfil if p.is_absolute())
    # the probe did run, and each way was refused by the confinement, not missed
    key = str(planted["home"] / "signing_key.pem")
    assert probes[f"file {key}"] == "refused: PermissionError"
    assert probes[f"file {planted['home'] / 'keys.json'}"] == "refused: PermissionError"
    assert probes[f"list {planted['home']}"] == "refused: PermissionError"
    assert set(json.loads(probes["environ"])) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "LC_CTYPE"}
    assert all(got.startswith("refused") for what, got in probes.items() if what.startswith(("/proc/", "parent")))
    assert all(got.startswith("refused") for what, got in probes.items()
               if what.startswith(("unix socket", "tcp socket", "fork", "cat", "write /", "via ")))
    assert all(got.startswith("refused") or got == "" for what, got in probes.items() if what.startswith("fd "))
    assert probes["write exfil.txt"].isdigit()  # its own scratch folder is writable (and removed afterwards)
    assert not [what for what in probes if what.startswith("walk ") and "/etc" in what]


def test_the_same_probe_finds_the_key_when_nothing_confines_it(tmp_path: Path, planted: dict[str, Path]) -> None:
    """The control: with Landlock and seccomp left out, the hostile generator does read the key (so the test
    above would fail if the confinement did not hold)."""
    folder, exfil = _hostile_world(tmp_path, planted)
    try:
        answer = run_world_code(folder / "data.py", folder, "rows", 3, date(2025, 6, 30), where="test",
                                confine=False)
        assert KEY_SECRET in json.dumps(answer.body["rows"]) and API_SECRET in json.dumps(answer.body["rows"])
        # the child's own environment is minimal even so (unconfined, it may still find the secret elsewhere: in
        # the parent's memory, or in another process's /proc/PID/environ, which is what the confinement stops)
        own = {what: got for _, what, got in answer.body["rows"]["loot"]}
        assert ENV_SECRET not in own["environ"] and ENV_SECRET not in own["self environ"]
    finally:
        for path in exfil:
            if path.is_absolute() and path.is_relative_to("/tmp") and not path.is_relative_to(tmp_path):
                path.unlink(missing_ok=True)


def _in_process(world_folder: Path):  # the old way, here only to compare with: import data.py into this process
    spec = importlib.util.spec_from_file_location("reviews_data_for_comparison", world_folder / "data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rows


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_an_ordinary_generator_gives_the_same_rows_and_world_version() -> None:
    world = load_world_folder(REVIEWS)
    imported = replace(world, generate_rows=_in_process(REVIEWS))
    assert world.seed_rows() == {k: tuple(tuple(r) for r in v) for k, v in imported.seed_rows().items()}
    assert sum(len(v) for v in world.seed_rows().values()) > 100
    assert world.seed_fingerprint == imported.seed_fingerprint
    assert world_version(world) == world_version(imported)
    later = world.with_anchor(date(2025, 9, 30))
    assert later.seed_rows() == {k: tuple(tuple(r) for r in v) for k, v in
                                 _in_process(REVIEWS)(world.seed, date(2025, 9, 30)).items()}


def _generator(tmp_path: Path, body: str, columns: str = '{ name = "id", type = "int" }, { name = "body" }') -> Path:
    folder = tmp_path / "gen"
    folder.mkdir(exist_ok=True)
    (folder / "world.toml").write_text(f'name = "gen"\ndata_anchor = 2025-06-30\n\n[[table]]\nname = "items"\n'
                                       f'columns = [{columns}]\n\n[data]\ngenerator = "data.py"\n')
    (folder / "data.py").write_text(body)
    return folder


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
@pytest.mark.parametrize(("body", "columns", "message"), [
    ("def rows(seed, anchor):\n    return {'orders': [(1, 'x')]}\n", None,
     r"rows for table 'orders', which the world does not declare. Fix: use one of items"),
    ("def rows(seed, anchor):\n    return {'items': [(1, 'x', 'extra')]}\n", None,
     r"table 'items', row 0 has 3 values; expected 2 \(id, body\)"),
    ("def rows(seed, anchor):\n    return {'items': [('one', 'x')]}\n", None,
     r"row 0, column 'id' holds str 'one'; expected an integer"),
    ("def rows(seed, anchor):\n    return {'items': [(1, None)]}\n", None,
     r"column 'body' is None; the column is not nullable"),
    ("def rows(seed, anchor):\n    return {'items': [(1, anchor)]}\n", None,
     r"holds a date; a seed value is None, an int, a float or a str \(write a date as value.isoformat\(\)\)"),
    ("def rows(seed, anchor):\n    return {'items': [(1, float('nan'))]}\n", '{ name = "id", type = "int" }, '
     '{ name = "x", type = "real" }', r"Out of range float"),
    ("def rows(seed, anchor):\n    raise RuntimeError('the generator broke')\n", None,
     r"rows\(seed, anchor\) failed: RuntimeError: the generator broke \(at data.py:2\)"),
    ("ROWS = 1\n", None, r"data.py defines no rows\(seed, anchor\)"),
    ("import os\nos._exit(9)\n", None, r"gave no answer: the process exited with status 9"),
])
def test_the_answer_is_checked_as_data(tmp_path: Path, body: str, columns: str | None, message: str) -> None:
    folder = _generator(tmp_path, body, *(c for c in [columns] if c))
    world = load_world_folder(folder)
    with pytest.raises(WorldFolderError, match=r"world.toml:\d+: .*" + message):
        world.seed_rows()


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_a_generator_that_prints_still_answers_and_may_write_its_scratch(tmp_path: Path) -> None:
    folder = _generator(tmp_path, "import os, sys\nprint('hello from the generator')\n"
                        "def rows(seed, anchor):\n    open('scratch.txt', 'w').write('ok')\n"
                        "    print('noise', file=sys.stdout)\n"
                        "    return {'items': [(i, open('scratch.txt').read() + str(seed)) for i in (1, 2)]}\n")
    assert load_world_folder(folder).seed_rows() == {"items": ((1, "ok0"), (2, "ok0"))}


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_a_generator_past_its_time_or_rows_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_code, "GENERATOR_TIMEOUT_S", 1.5)
    folder = _generator(tmp_path, "import time\ndef rows(seed, anchor):\n    while True:\n        time.sleep(0.1)\n")
    with pytest.raises(WorldFolderError, match=r"ran longer than 2 s and was stopped"):  # stopped, not waited for
        load_world_folder(folder).seed_rows()
    monkeypatch.setattr(_code, "MAX_SEED_ROWS", 10)
    (folder / "data.py").write_text("def rows(seed, anchor):\n    return {'items': [(i, 'x') for i in range(11)]}\n")
    with pytest.raises(WorldFolderError, match=r"returned more than 10 rows"):
        load_world_folder(folder).seed_rows()


def test_world_code_is_refused_where_it_cannot_be_confined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state home inside the world folder (which the child must read) cannot be kept from it; on a machine
    without Landlock nothing can: either way the code is refused, unless the user trusts it."""
    folder = _generator(tmp_path, "def rows(seed, anchor):\n    return {'items': [(1, 'ran')]}\n")
    monkeypatch.setenv("REHEARSAL_HOME", str(folder / "state"))
    monkeypatch.delenv(TRUST_WORLD_CODE_ENV, raising=False)
    with pytest.raises(WorldFolderError, match=r"world.toml:\d+: data.py was not run: world code runs only "
                                               r"confined, and here .*Fix: .*REHEARSAL_TRUST_WORLD_CODE=1"):
        load_world_folder(folder).seed_rows()
    monkeypatch.setenv(TRUST_WORLD_CODE_ENV, "1")
    with pytest.warns(RuntimeWarning, match="ran without one layer of its confinement"):
        assert load_world_folder(folder).seed_rows() == {"items": ((1, "ran"),)}


@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_world_add_show_and_run_use_the_confined_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from rehearsal_env.cli import main

    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    copy = tmp_path / "reviews"
    shutil.copytree(REVIEWS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert add_world_folder(copy).seed_rows()["users"][0][1] == "review-bot"
    assert main(["world", "show", "reviews"]) == 0
    assert "pull_requests" in capsys.readouterr().out
    (copy / "data.py").write_text("def rows(seed, anchor):\n    return {'nope': []}\n")
    assert main(["world", "add", str(copy)]) == 2
    assert "which the world does not declare" in capsys.readouterr().err
    assert not (copy / "__pycache__").exists()  # nothing of the folder was imported (or cached) here



@pytest.mark.skipif(not CONFINED, reason="no Landlock here: test_world_code_is_refused_where_it_cannot_be_confined")
def test_run_seeds_from_the_confined_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes world with its seed.sql replaced by a generator giving the same rows: the same seed, the same
    verdicts from ``rehearsal run``."""
    from rehearsal_env.cli import main

    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    notes = Path(__file__).parent / "worlds" / "notes"
    copy = tmp_path / "notes"
    shutil.copytree(notes, copy)
    seed = {k: [list(r) for r in v] for k, v in load_world_folder(notes).seed_rows().items()}
    (copy / "data.py").write_text(f"import json\n\ndef rows(seed, anchor):\n"
                                  f"    return json.loads({json.dumps(seed)!r})\n")
    (copy / "world.toml").write_text((copy / "world.toml").read_text().replace('sql = "seed.sql"',
                                                                               'generator = "data.py"'))
    world = load_world_folder(copy)
    assert world.seed_fingerprint == load_world_folder(notes).seed_fingerprint
    assert main(["run", "--world", str(copy), "--agent", "reference", "--quiet", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["episodes"] == summary["verified"] > 0
