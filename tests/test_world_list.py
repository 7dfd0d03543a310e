"""``rehearsal world list`` answers from a cache keyed by each world's identity (``cli._world_list``): a world
is loaded again only when what it is made from changed. (Timed by hand, not here: docs/tau2.md.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rehearsal_env.cli import _world_list, main
from rehearsal_env.worlds import load_world


def test_a_listed_world_is_not_loaded_again_until_its_identity_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path))
    loaded: list[str] = []

    def counting(name: str) -> Any:
        loaded.append(name)
        return load_world(name)

    monkeypatch.setattr(_world_list, "load_world", counting)
    assert main(["world", "list"]) == 0
    first = capsys.readouterr().out
    assert "shop" in loaded and _world_list.cache_file().is_file() and " 90 scenarios" in first
    loaded.clear()
    assert main(["world", "list"]) == 0
    assert capsys.readouterr().out == first and loaded == []  # all from the cache
    monkeypatch.setattr(_world_list, "code_fingerprint", lambda: "other code")
    assert main(["world", "list"]) == 0
    assert capsys.readouterr().out == first and "shop" in loaded  # the code changed: loaded again


def test_a_damaged_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path))
    _world_list.cache_file().parent.mkdir(parents=True)
    _world_list.cache_file().write_text("{not json")
    assert main(["world", "list"]) == 0
    assert "shop" in capsys.readouterr().out
    assert main(["world", "list"]) == 0 and "shop" in capsys.readouterr().out


def test_only_the_command_run_is_imported(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code = ("import sys; from rehearsal_env.cli import main; main(['world', 'list']); "
            "print(sorted(m for m in ('scipy', 'pandas', 'openai', 'rehearsal_env.measure') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True,
                         env={**os.environ, "REHEARSAL_HOME": str(tmp_path)})
    assert out.stdout.strip().splitlines()[-1] == "[]"
