"""The documentation: every ```python block of README.md and docs/**/*.md runs as written, the README
stays a front door, its Layout matches the package, and every page is in the site's navigation.

A newcomer copies these blocks first; one that raises (as the quick-start once did with
``KeyError: 'verdict'``) fails here, named by its file and line. Each block runs on its own, in a
scratch directory. A block that needs an optional extra says so on the line above its fence,
``<!-- requires: openenv -->``: it is skipped when that extra's package is not installed, unless
``REHEARSAL_REQUIRE_<PART>=1`` (as in CI). A block that needs a long run belongs in a ``bash`` or
text fence, not a python one. ``mkdocs build --strict`` (``make docs``, ``.ci/run``) checks the links.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
BLOCK = re.compile(r"^(?:<!-- requires: (\w+) -->\n)?```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
EXTRAS = {
    "trl": ("trl", "TRL"),
    "openenv": ("openenv", "OPENENV"),
    "verifiers": ("verifiers", "VERIFIERS"),
    "mcp": ("mcp", "MCP"),
    "atif": ("atif", "ATIF"),
    "live": ("llama_cpp", "LIVE_MODEL"),
    "sandbox": ("docker", "DOCKER"),
    "skyrl": ("skyrl_gym", "SKYRL"),
    "tinker": ("tinker_cookbook", "TINKER"),
    "verl": ("verl", "VERL"),
}
"""Extra -> (the package it installs, the PART of ``REHEARSAL_REQUIRE_<PART>``)."""
README_MAX_LINES = 300
"""The README is a front door; the reference lives in docs/ (issue 22 section 4)."""


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line of the opening fence, code, the extra it requires or None) of every ```python block."""
    out = []
    for m in BLOCK.finditer(text):
        line = text[:m.start()].count("\n") + 1 + (1 if m.group(1) else 0)  # the fence's own line
        out.append((line, m.group(2), m.group(1)))
    return out


BLOCKS = [(page, *block) for page in PAGES for block in python_blocks(page.read_text())]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_extractor_finds_python_blocks_and_their_requirements() -> None:
    sample = ("text\n```python\nx = 1\n```\nmore\n```bash\nls\n```\n<!-- requires: trl -->\n"
              "```python\ny = 2\n```\n")
    assert python_blocks(sample) == [(2, "x = 1\n", None), (10, "y = 2\n", "trl")]
    assert python_blocks(README.read_text()), "the README's first example is a python block"
    assert len({b[0] for b in BLOCKS}) > 5, "the docs pages have python blocks"


@pytest.mark.parametrize(("page", "line", "code", "extra"), BLOCKS,
                         ids=[f"{_name(b[0])}:{b[1]}" for b in BLOCKS])
def test_a_python_block_runs_as_written(page: Path, line: int, code: str, extra: str | None, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if extra is not None:
        assert extra in EXTRAS, f"{_name(page)}:{line}: unknown extra {extra!r}; expected one of {sorted(EXTRAS)}"
        package, part = EXTRAS[extra]
        if importlib.util.find_spec(package) is None:
            if os.environ.get(f"REHEARSAL_REQUIRE_{part}") == "1":
                pytest.fail(f"REHEARSAL_REQUIRE_{part}=1 but {package} is not installed")
            pytest.skip(f"needs the {extra} extra: pip install -e '.[{extra}]'")
    monkeypatch.chdir(tmp_path)
    padded = "\n" * (line) + code  # tracebacks name the page's own line numbers
    exec(compile(padded, str(page), "exec"), {"__name__": "__docs__"})  # noqa: S102


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, expected at most {README_MAX_LINES}: move reference material to a page "
        "under docs/ and link to it")


def _nav_files(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_files(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_nav_files(v) for v in nav.values())) if nav else set()
    return set()


def test_every_docs_page_is_in_the_navigation() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # noqa: S506 (tags as text)
    listed = _nav_files(config["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - listed == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - listed)}"
    assert listed - pages == set(), f"mkdocs.yml's nav names pages that do not exist: {sorted(listed - pages)}"


def test_the_readme_layout_names_every_part_of_the_package() -> None:
    text = README.read_text()
    m = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, re.S | re.M)
    assert m, "README.md has a '## Layout' section with a fenced listing of rehearsal_env/"
    listed = set(re.findall(r"^  (\w+(?:\.py|/))", m.group(1), re.M))
    package = ROOT / "rehearsal_env"
    present = {p.name + "/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    present.add("configs/") if (package / "configs").is_dir() else None
    assert present - listed == set(), f"README's Layout leaves out {sorted(present - listed)} (ls rehearsal_env/)"
    assert listed - present == set(), f"README's Layout names {sorted(listed - present)}, which rehearsal_env/ lacks"
