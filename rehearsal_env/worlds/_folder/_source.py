"""Where a world folder's problems are: the line of a key in a TOML file, and errors that say file, line and fix."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

WORLD_FILE = "world.toml"


class WorldFolderError(ValueError):
    """A world folder does not describe a valid world; the message says file, line and fix."""




class Source:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = path.read_text()
        self.lines = self.text.splitlines()

    def line(self, array: str | None = None, index: int = 0, key: str | None = None) -> int:
        """The line of ``key`` in the ``index``-th ``[[array]]`` (or the table ``[array]``); 1 when unknown."""
        start, end = 0, len(self.lines)
        if array is not None:
            headers = [i for i, ln in enumerate(self.lines) if ln.strip() in (f"[[{array}]]", f"[{array}]")]
            if index < len(headers):
                start = headers[index]
                end = headers[index + 1] if index + 1 < len(headers) else end
        if key is not None:
            pattern = re.compile(rf"^\s*(\[{re.escape(array or '')}\.)?{re.escape(key)}(\s*=|\]|\.)")
            for i in range(start, end):
                if pattern.match(self.lines[i]):
                    return i + 1
        return start + 1

    def error(self, line: int, problem: str, fix: str) -> WorldFolderError:
        return WorldFolderError(f"{self.path}:{line}: {problem}. Fix: {fix}")


def read_toml(path: Path) -> tuple[Source, dict[str, Any]]:
    source = Source(path)
    try:
        return source, tomllib.loads(source.text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise source.error(int(match.group(1)) if match else 1, f"not valid TOML ({exc})",
                           "correct the syntax on that line (strings in quotes, one key = value per line)") from exc

