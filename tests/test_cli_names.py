"""The command line's two console scripts, and the hint when ``rehearsal`` on PATH is another package's.

Runs the installed scripts themselves (what pip wrote next to this interpreter): ``rehearsal-env`` with a PATH
whose ``rehearsal`` is a stand-in for rehearsal-kit's script, then with ours first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _script(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"expected the console script {path}; reinstall the package (pip install -e .) to write it")
    return path


def _run(name: str, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_script(name)), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": path})


def test_both_names_are_the_same_entry_point() -> None:
    scripts = {e.name: e.value for e in distribution("rehearsal-env").entry_points if e.group == "console_scripts"}
    assert scripts == {"rehearsal": "rehearsal_env.cli:main", "rehearsal-env": "rehearsal_env.cli:main"}
    ours = _run("rehearsal", os.environ.get("PATH", ""), "--help")
    alias = _run("rehearsal-env", os.environ.get("PATH", ""), "--help")
    assert ours.returncode == alias.returncode == 0
    assert ours.stdout.startswith("usage: rehearsal ") and alias.stdout.startswith("usage: rehearsal-env ")
    assert ours.stdout.split("\n", 1)[1] == alias.stdout.split("\n", 1)[1]  # the same commands


def test_rehearsal_env_says_when_rehearsal_on_path_is_another_package(tmp_path: Path) -> None:
    kit = tmp_path / "kit-bin"
    kit.mkdir()
    theirs = kit / "rehearsal"
    theirs.write_text("#!/bin/sh\n# rehearsal-kit's command line\nexec python3 -m rehearsal_kit \"$@\"\n")
    theirs.chmod(0o755)
    rest = os.environ.get("PATH", "")
    shadowed = _run("rehearsal-env", os.pathsep.join([str(kit), str(BIN), rest]), "--help")
    assert shadowed.returncode == 0 and shadowed.stdout.startswith("usage: rehearsal-env ")
    (hint,) = shadowed.stderr.strip().splitlines()
    assert str(theirs) in hint and "another package" in hint and "rehearsal-env" in hint
    mine_first = _run("rehearsal-env", os.pathsep.join([str(BIN), str(kit), rest]), "--help")
    assert mine_first.returncode == 0 and not mine_first.stderr  # `rehearsal` on PATH is ours: nothing to say
    none = _run("rehearsal-env", str(tmp_path / "empty"), "--help")
    assert none.returncode == 0 and not none.stderr  # no `rehearsal` on PATH at all
