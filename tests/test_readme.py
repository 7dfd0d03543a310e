"""Every ```python block of README.md runs as written (each on its own, in a scratch directory).

A newcomer copies these blocks first; one that raises (as the quick-start once did with
``KeyError: 'verdict'``) fails here, named by its line in the README. A block that needs an
optional extra says so on the line above its fence, ``<!-- requires: openenv -->``: it is skipped
when that extra's package is not installed, unless ``REHEARSAL_REQUIRE_<EXTRA>=1`` (as in CI).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^(?:<!-- requires: (\w+) -->\n)?```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
EXTRAS = {"trl": "trl", "openenv": "openenv", "verifiers": "verifiers"}
"""Extra -> the package it installs (what ``<!-- requires: EXTRA -->`` looks for)."""


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line of the opening fence, code, the extra it requires or None) of every ```python block."""
    out = []
    for m in BLOCK.finditer(text):
        line = text[:m.start()].count("\n") + 1 + (1 if m.group(1) else 0)  # the fence's own line
        out.append((line, m.group(2), m.group(1)))
    return out


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_blocks_and_the_extractor_finds_them() -> None:
    assert BLOCKS, f"no ```python block found in {README}"
    sample = ("text\n```python\nx = 1\n```\nmore\n```bash\nls\n```\n<!-- requires: trl -->\n"
              "```python\ny = 2\n```\n")
    assert python_blocks(sample) == [(2, "x = 1\n", None), (10, "y = 2\n", "trl")]


@pytest.mark.parametrize(("line", "code", "extra"), BLOCKS, ids=[f"README.md:{b[0]}" for b in BLOCKS])
def test_a_readme_python_block_runs_as_written(line: int, code: str, extra: str | None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if extra is not None:
        assert extra in EXTRAS, f"README.md:{line}: unknown extra {extra!r}; expected one of {sorted(EXTRAS)}"
        if importlib.util.find_spec(EXTRAS[extra]) is None:
            if os.environ.get(f"REHEARSAL_REQUIRE_{extra.upper()}") == "1":
                pytest.fail(f"REHEARSAL_REQUIRE_{extra.upper()}=1 but {EXTRAS[extra]} is not installed")
            pytest.skip(f"needs the {extra} extra: pip install -e '.[{extra}]'")
    monkeypatch.chdir(tmp_path)
    padded = "\n" * line + code  # tracebacks name the README's own line numbers
    exec(compile(padded, str(README), "exec"), {"__name__": "__readme__"})  # noqa: S102
