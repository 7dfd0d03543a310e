"""Worlds from a folder: world.toml + scenarios/*.toml, sql tools, errors that name file, line and fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rehearsal_env.agents import make_agent
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.identity import world_version
from rehearsal_env.runner import run_episode
from rehearsal_env.verdict import Outcome
from rehearsal_env.worlds import (
    WorldFolderError,
    add_world_folder,
    application_of,
    load_world,
    load_world_folder,
    world_names,
)

NOTES = Path(__file__).parent / "worlds" / "notes"


def _play(world, scenario, solution: str, backend: str = "sqlite", **options):
    env = RehearsalEnv(scenario, world, backend=backend, **options)
    try:
        result = run_episode(env, make_agent(solution, scenario))
        return result.verdict, env.digest()
    finally:
        env.close()


def test_a_path_works_where_a_world_name_goes() -> None:
    world = load_world(str(NOTES))
    assert world.name == "notes"
    assert [t.name for t in world.tools] == ["find_user", "list_notes", "add_note", "edit_note", "delete_note"]
    assert {s.split for s in world.scenarios()} == {"train", "dev", "holdout"}
    assert application_of(world) is None  # sql tools only: it runs in process
    assert world.seed_rows()["notes"][3] == (4, 2, "Old idea; it's obsolete", 0, "2025-06-20T09:00:00", None)


def test_world_add_records_the_folder_under_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    copy = tmp_path / "notes-copy"
    shutil.copytree(NOTES, copy)
    text = (copy / "world.toml").read_text().replace('name = "notes"', 'name = "notes-added"', 1)
    (copy / "world.toml").write_text(text)
    add_world_folder(copy)
    assert "notes-added" in world_names()
    assert load_world("notes-added").name == "notes-added"


def test_reference_verified_null_and_wrong_not_on_sqlite() -> None:
    world = load_world_folder(NOTES)
    for scenario in world.scenarios():
        assert _play(world, scenario, "reference")[0].outcome is Outcome.VERIFIED, scenario.id
        assert _play(world, scenario, "null")[0].outcome is Outcome.NOT_ACHIEVED, scenario.id
        for wrong in scenario.wrong:
            outcome = _play(world, scenario, wrong.name)[0].outcome
            assert outcome in (Outcome.NOT_ACHIEVED, Outcome.RULE_VIOLATED), (scenario.id, wrong.name)


def test_postgres_reaches_the_same_verdicts_and_digests(postgres_dsn: str) -> None:
    world = load_world_folder(NOTES)
    for scenario in world.scenarios():
        for solution in ("reference", *(w.name for w in scenario.wrong)):
            lite, lite_digest = _play(world, scenario, solution)
            pg, pg_digest = _play(world, scenario, solution, "postgres", dsn=postgres_dsn)
            assert (pg.outcome, pg_digest) == (lite.outcome, lite_digest), (scenario.id, solution)
        assert _play(world, scenario, "reference", "postgres", dsn=postgres_dsn)[0].outcome is Outcome.VERIFIED


def test_sql_tool_refuses_a_missing_row_as_the_application() -> None:
    world = load_world_folder(NOTES)
    scenario = world.scenario("clean-up-0003")
    env = RehearsalEnv(scenario, world, stress=False)
    try:
        env.reset(seed=0)
        observation, *_ = env.step('{"tool": "delete_note", "args": {"note_id": 999}}')
        assert '"status": "error"' in observation and "no note 999" in observation
    finally:
        env.close()


def test_http_tools_off_the_sandbox_are_the_environment_failing() -> None:
    world = load_world("reviews")
    scenario = world.scenarios()[0]
    verdict, _ = _play(world, scenario, "reference")
    assert verdict.outcome is Outcome.NOT_SCORED
    assert "--backend docker" in (verdict.reason or "")


# -- errors name file, line and fix -----------------------------------------------------------
def _broken(tmp_path: Path, old: str, new: str, file: str = "world.toml") -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(NOTES, copy)
    path = copy / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return copy


def _line_of(folder: Path, file: str, needle: str) -> int:
    return next(i for i, line in enumerate((folder / file).read_text().splitlines(), 1) if needle in line)


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    folder = _broken(tmp_path, 'description = "Keeps', 'description = Keeps')
    with pytest.raises(WorldFolderError, match=rf"world.toml:{_line_of(folder, 'world.toml', 'description = Keeps')}: "
                                               r"not valid TOML.*Fix:"):
        load_world_folder(folder)


def test_unknown_tool_of_a_role_names_the_line_and_the_known_tools(tmp_path: Path) -> None:
    folder = _broken(tmp_path, 'tools = ["find_user", "list_notes"]', 'tools = ["find_user", "list_nots"]')
    line = _line_of(folder, "world.toml", "list_nots")
    with pytest.raises(WorldFolderError, match=rf"world.toml:{line}: role 'reader' lists unknown tool\(s\) "
                                               r"\['list_nots'\]. Fix: .*list_notes"):
        load_world_folder(folder)


def test_unbound_placeholder_names_the_sql_line(tmp_path: Path) -> None:
    folder = _broken(tmp_path, "WHERE author_id = :author_id ORDER BY id", "WHERE author_id = :author ORDER BY id")
    line = _line_of(folder, "world.toml", ":author ORDER")
    with pytest.raises(WorldFolderError, match=rf"world.toml:{line}: tool 'list_notes' binds :author.*Fix: declare"):
        load_world_folder(folder)


def test_seed_sql_error_names_its_own_file_and_line(tmp_path: Path) -> None:
    folder = _broken(tmp_path, "INSERT INTO notes (id, author_id", "INSERT INTO notes (id, writer_id", "seed.sql")
    line = _line_of(folder, "seed.sql", "writer_id")
    with pytest.raises(WorldFolderError, match=rf"seed.sql:{line}: table 'notes' has no column\(s\) \['writer_id'\]"):
        load_world_folder(folder)


def test_scenario_with_an_unknown_role_names_the_scenario_line(tmp_path: Path) -> None:
    folder = _broken(tmp_path, 'role = "editor"\ncategory = "note"\nrequest = "I\'m ana.',
                     'role = "boss"\ncategory = "note"\nrequest = "I\'m ana.', "scenarios/notes.toml")
    line = _line_of(folder, "scenarios/notes.toml", 'role = "boss"')
    with pytest.raises(WorldFolderError, match=rf"notes.toml:{line}: scenario 'edit-note-0002' plays role 'boss'. "
                                               r"Fix: use one of the roles"):
        load_world_folder(folder).scenarios()


def test_cli_world_add_validates_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from rehearsal_env.cli import main

    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    assert main(["world", "add", str(NOTES)]) == 0
    assert "added world notes" in capsys.readouterr().out
    folder = _broken(tmp_path, 'type = "sql"', 'type = "soap"')
    assert main(["world", "add", str(folder)]) == 2
    line = _line_of(folder, "world.toml", 'type = "soap"')
    assert f"world.toml:{line}: tool 'find_user': type is 'soap'. Fix:" in capsys.readouterr().err


MIGRATION = """-- the application's own migrations; a quote in a comment; splits no statement
CREATE TABLE users (id INTEGER PRIMARY KEY, login TEXT NOT NULL, name TEXT NOT NULL);
CREATE INDEX users_login ON users (login);
CREATE TABLE notes (
  id INTEGER PRIMARY KEY,
  author_id INTEGER NOT NULL REFERENCES users(id),
  body TEXT NOT NULL,
  pinned INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT
);
CREATE INDEX notes_author ON notes (author_id);
"""


def _from_migrations(tmp_path: Path, migration: str) -> Path:
    import re

    copy = tmp_path / "migrated"
    shutil.copytree(NOTES, copy)
    (copy / "migrations").mkdir()
    (copy / "migrations" / "001_init.sql").write_text(migration)
    text = (copy / "world.toml").read_text()
    text = re.sub(r"\[\[table\]\].*?(?=\[data\])", '[schema]\nsql = ["migrations/001_init.sql"]\n\n', text, flags=re.S)
    (copy / "world.toml").write_text(text)
    return copy


def test_the_schema_can_come_from_the_applications_migrations(tmp_path: Path) -> None:
    migrated = load_world_folder(_from_migrations(tmp_path, MIGRATION))
    declared = load_world_folder(NOTES)
    assert migrated.tables == declared.tables
    scenario = migrated.scenario("clean-up-0003")
    assert _play(migrated, scenario, "reference")[1] == _play(declared, declared.scenario("clean-up-0003"),
                                                               "reference")[1]


def test_a_migration_statement_we_do_not_read_names_its_line(tmp_path: Path) -> None:
    folder = _from_migrations(tmp_path, MIGRATION + "\nDROP TABLE notes;\n")
    line = _line_of(folder, "migrations/001_init.sql", "DROP TABLE")
    with pytest.raises(WorldFolderError, match=rf"001_init.sql:{line}: only CREATE TABLE and CREATE INDEX"):
        load_world_folder(folder)


def test_every_file_of_the_folder_is_part_of_the_world_version(tmp_path: Path) -> None:
    """A folder world's version covers its files (an http tool's path, the application's code, the
    seed data): the same files give the same id, and a change in any of them a new one."""
    copy = tmp_path / "notes"
    shutil.copytree(NOTES, copy)
    first = world_version(load_world_folder(copy))
    assert world_version(load_world_folder(copy)) == first
    (copy / "seed.sql").write_text((copy / "seed.sql").read_text() + "\n-- a comment changes the file\n")
    assert world_version(load_world_folder(copy)) != first


def test_seed_sql_is_split_by_the_parser_not_by_semicolons_in_text(tmp_path: Path) -> None:
    """A semicolon inside quoted text or a comment does not end a statement; an error names its line."""
    copy = tmp_path / "notes"
    shutil.copytree(NOTES, copy)
    seed = copy / "seed.sql"
    seed.write_text(seed.read_text() + "\n-- a comment; with a semicolon\n"
                    "INSERT INTO users (id, login, name) VALUES (9, 'semi;colon', 'It''s; fine');\n")
    rows = dict(load_world_folder(copy).seed_rows())["users"]
    assert (9, "semi;colon", "It's; fine") in rows
    seed.write_text(seed.read_text() + "\nINSERT INTO nowhere VALUES (1);\n")
    line = seed.read_text().splitlines().index("INSERT INTO nowhere VALUES (1);") + 1
    with pytest.raises(WorldFolderError, match=rf"seed.sql:{line}: only INSERT INTO"):
        load_world_folder(copy)


# -- world folders are untrusted input (issue 21 §5) ----------------------------------------------------------


SECRET = "TOP-SECRET-LINE-never-shown"


@pytest.fixture()
def secret(tmp_path: Path) -> Path:
    """A file outside any world folder whose first line must never appear in an error."""
    path = tmp_path / "outside" / "secret.sql"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\nmore\n")
    return path


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside/secret.sql", "SECRET"])
def test_a_schema_file_outside_the_folder_is_refused_without_echoing_it(tmp_path: Path, secret: Path,
                                                                       name: str) -> None:
    folder = _from_migrations(tmp_path, MIGRATION)
    if name == "SECRET":  # a symbolic link inside the folder that points out of it
        (folder / "migrations" / "link.sql").symlink_to(secret)
        name = "migrations/link.sql"
    text = (folder / "world.toml").read_text().replace('"migrations/001_init.sql"', f'"{name}"')
    (folder / "world.toml").write_text(text)
    with pytest.raises(WorldFolderError, match=r"world.toml:\d+: \[schema\] sql file .* (absolute path|resolves "
                                               r"outside the world folder)") as refused:
        load_world_folder(folder)
    assert SECRET not in str(refused.value) and "more" not in str(refused.value)
    assert Path("/etc/hostname").read_text().strip() not in str(refused.value).replace("/etc/hostname", "")


def test_a_file_of_the_folder_that_is_not_sql_is_refused_without_echoing_it(tmp_path: Path) -> None:
    folder = _from_migrations(tmp_path, f"{SECRET} and more words here\n")
    with pytest.raises(WorldFolderError, match="001_init.sql") as refused:
        load_world_folder(folder)
    assert SECRET not in str(refused.value)


def test_a_generator_outside_the_folder_never_runs(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(ran)!r}, 'w').write('ran')\ndef rows(seed, anchor):\n    return {{}}\n")
    for name in (str(evil), "../evil.py"):
        folder = _broken(tmp_path / name.replace("/", "_"), 'sql = "seed.sql"', f'generator = "{name}"')
        line = _line_of(folder, "world.toml", "generator =")
        with pytest.raises(WorldFolderError, match=rf"world.toml:{line}: \[data\] generator"):
            load_world_folder(folder)
        with pytest.raises(WorldFolderError):
            add_world_folder(folder)
    assert not ran.exists()


def test_application_folder_must_be_a_subfolder(tmp_path: Path) -> None:
    reviews = Path(__file__).resolve().parents[1] / "worlds" / "reviews"
    for i, (value, problem) in enumerate((("/", "absolute path"), ("..", "resolves outside the world folder"),
                                          (".", "is the world folder itself"), ("nowhere", "is not a folder inside"))):
        copy = tmp_path / f"reviews-{i}"
        shutil.copytree(reviews, copy)
        text = (copy / "world.toml").read_text().replace('folder = "app"', f'folder = "{value}"', 1)
        (copy / "world.toml").write_text(text)
        with pytest.raises(WorldFolderError, match=problem):
            load_world_folder(copy)


def test_a_symbolic_link_out_of_the_folder_is_refused(tmp_path: Path, secret: Path) -> None:
    copy = tmp_path / "notes"
    shutil.copytree(NOTES, copy)
    (copy / "extra.sql").symlink_to(secret)
    with pytest.raises(WorldFolderError, match="extra.sql: a symbolic link that points outside") as refused:
        load_world_folder(copy)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("name", ["a/b", "../../x", "Shop", "", "x" * 65, "notes\n"])
def test_world_names_follow_one_pattern(tmp_path: Path, name: str) -> None:
    folder = _broken(tmp_path, 'name = "notes"', f"name = {name!r}".replace("'", '"'))
    with pytest.raises(WorldFolderError, match="is not a world name. Fix: a world name is a lowercase letter"):
        load_world_folder(folder)
    from rehearsal_env.worlds import register_world

    with pytest.raises(ValueError, match="expected a world name"):
        register_world(name, lambda: load_world("shop"))


def test_one_bad_registry_entry_breaks_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """worlds.json edited to hold a/b, ../../x and a folder that no longer loads: every command still
    works, the good entries are listed, the bad ones reported."""
    import json
    import subprocess
    import sys

    from rehearsal_env.cli import main
    from rehearsal_env.worlds import registry_problems

    home = tmp_path / "home"
    monkeypatch.setenv("REHEARSAL_HOME", str(home))
    good = tmp_path / "good"
    shutil.copytree(NOTES, good)
    (good / "world.toml").write_text((good / "world.toml").read_text().replace('name = "notes"', 'name = "good"', 1))
    add_world_folder(good)
    broken = _broken(tmp_path, "[data]", "[data")
    added = json.loads((home / "worlds.json").read_text())
    (home / "worlds.json").write_text(json.dumps({**added, "a/b": str(good), "../../x": str(good),
                                                  "broken": str(broken)}))
    assert "good" in world_names() and "a/b" not in world_names() and "../../x" not in world_names()
    problems = registry_problems()
    assert len(problems) == 2 and all("a world name is" in p for p in problems)
    assert main(["world", "list"]) == 0
    out, err = capsys.readouterr()
    assert "good" in out and "broken" in out and "cannot be loaded" in out and "shop" in out
    assert "'a/b' left out" in err and "'../../x' left out" in err
    done = subprocess.run([sys.executable, "-c", "import rehearsal_env; rehearsal_env.register_envs(); print('ok')"],
                          capture_output=True, text=True, env={**__import__("os").environ, "REHEARSAL_HOME": str(home)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_deeply_nested_toml_names_its_file_and_line(tmp_path: Path) -> None:
    folder = _broken(tmp_path, "seed = 1", "seed = 1\ndeep = " + "[" * 5000 + "]" * 5000)
    with pytest.raises(WorldFolderError, match=r"world.toml:6: arrays or inline tables nest more than 32 deep"):
        load_world_folder(folder)
    scenario = folder / "scenarios" / "deep.toml"
    scenario.write_text("# a deep scenario file\n\nx = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")
    folder = _broken(tmp_path / "again", "seed = 1", "seed = 1")
    (folder / "scenarios" / "deep.toml").write_text(scenario.read_text())
    with pytest.raises(WorldFolderError, match=r"deep.toml:3: arrays or inline tables nest more than 32 deep"):
        load_world_folder(folder).scenarios()


def test_a_big_file_is_refused_by_its_size_without_reading_it(tmp_path: Path) -> None:
    copy = tmp_path / "notes"
    shutil.copytree(NOTES, copy)
    with open(copy / "big.bin", "wb") as fh:  # sparse: 2 GiB on paper, nothing on disk
        fh.truncate(2 * 2**30)
    with pytest.raises(WorldFolderError, match=r"big.bin holds 2,147,483,648 bytes; a world folder's files hold at "
                                               r"most 268,435,456"):
        load_world_folder(copy)


def test_file_hashes_are_streamed_and_cached_until_the_file_changes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    import rehearsal_env.worlds._folder._hashes as hashes

    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path / "home"))
    copy = tmp_path / "notes"
    shutil.copytree(NOTES, copy)
    big = copy / "data.bin"
    big.write_bytes(b"x" * (3 * 2**20))
    first = world_version(load_world_folder(copy))
    assert (tmp_path / "home" / hashes.CACHE_FILE).is_file()
    opened: list[str] = []
    real = hashlib.file_digest
    monkeypatch.setattr(hashlib, "file_digest", lambda fh, name: opened.append(fh.name) or real(fh, name))
    hashes._loaded_from = None  # as a new process would: the cache comes from the home
    assert world_version(load_world_folder(copy)) == first and opened == []
    stat = big.stat()
    big.write_bytes(b"y" * (3 * 2**20))  # the same size, its modification time set back
    __import__("os").utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert world_version(load_world_folder(copy)) != first and opened == [str(big)]
