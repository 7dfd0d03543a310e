"""Where a world folder's problems are: the line of a key in a TOML file, and errors that say file, line and fix."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

WORLD_FILE = "world.toml"
MAX_TOML_BYTES = 4 * 2**20
"""The largest ``world.toml`` or scenario file read (4 MiB)."""
MAX_TOML_DEPTH = 32
"""The deepest nesting of arrays and inline tables a TOML file of a world may have."""


class WorldFolderError(ValueError):
    """A world folder does not describe a valid world; the message says file, line and fix."""




class Source:
    def __init__(self, path: Path) -> None:
        self.path = path
        size = path.stat().st_size
        if size > MAX_TOML_BYTES:
            raise WorldFolderError(f"{path}: {size:,} bytes; a world's TOML files hold at most {MAX_TOML_BYTES:,}. "
                                   "Fix: split the scenarios over several files, keep data in [data]")
        try:
            self.text = path.read_text()
        except UnicodeDecodeError as exc:
            raise WorldFolderError(f"{path}: not UTF-8 text (byte {exc.start}). Fix: save the file as UTF-8") from None
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


def _too_deep(text: str, limit: int) -> int | None:
    """The line where arrays and inline tables nest deeper than ``limit`` (None: they never do).

    Brackets inside strings and comments do not count; a ``[table]`` header opens one level and closes it.
    """
    depth, line, i, n = 0, 1, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif ch in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else ch
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                if text[i] == "\\" and quote[0] == '"':
                    i += 1
                elif text[i] == "\n":
                    if len(quote) == 1:
                        break  # an unterminated one-line string: tomllib reports it
                    line += 1
                i += 1
            i += len(quote)
            continue
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line
        elif ch in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def read_toml(path: Path) -> tuple[Source, dict[str, Any]]:
    """A world's TOML file, parsed, with its :class:`Source` for errors (size and nesting bounded)."""
    source = Source(path)
    deep = _too_deep(source.text, MAX_TOML_DEPTH)
    if deep is not None:
        raise source.error(deep, f"arrays or inline tables nest more than {MAX_TOML_DEPTH} deep",
                           "flatten the value: a world's TOML never needs that much nesting")
    try:
        return source, tomllib.loads(source.text)
    except RecursionError:
        raise source.error(1, "nested too deeply to read", "flatten the nested arrays and tables") from None
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise source.error(int(match.group(1)) if match else 1, f"not valid TOML ({exc})",
                           "correct the syntax on that line (strings in quotes, one key = value per line)") from exc

