"""Every path a world folder names stays inside the folder, and every file it holds has a bounded size.

A world folder is untrusted input: ``world.toml`` names files (``[schema] sql``, ``[data] sql`` and
``generator``, ``[application] folder``), and the folder itself may hold symbolic links. Each such path
must be relative and resolve, symbolic links followed, inside the folder; anything else is refused
before the file is opened, so an error can never show what a file outside the folder holds.
"""

from __future__ import annotations

from pathlib import Path

from ._source import WorldFolderError

MAX_FILE_BYTES = 256 * 2**20
"""The largest file a world folder may hold (256 MiB)."""
MAX_FILES = 20_000
"""The most files a world folder may hold."""
_SHOWN = 120


def shown(text: object) -> str:
    """A name as an error shows it: at most 120 characters of its repr."""
    r = repr(text)
    return r if len(r) <= _SHOWN else r[:_SHOWN] + "...'"


def inside(folder: Path, name: object, where: str, what: str, *, directory: bool = False) -> Path:
    """The path ``name`` (as ``world.toml`` wrote it) resolved inside ``folder``.

    ``where`` is ``file:line`` of the key that names it, ``what`` what the path is for.

    Raises:
        WorldFolderError: not a relative path string, outside the folder (``..``, absolute, or a symbolic
            link pointing out), missing, of the wrong kind, or larger than :data:`MAX_FILE_BYTES`.
    """
    root = folder.resolve()
    if not isinstance(name, str) or not name or "\x00" in name:
        raise WorldFolderError(f"{where}: {what} must be a path relative to the world folder; got {shown(name)}. "
                               "Fix: write a relative path such as \"data/seed.sql\"")
    if Path(name).is_absolute():
        raise WorldFolderError(f"{where}: {what} {shown(name)} is an absolute path; every path a world names "
                               "must stay inside its folder. Fix: put the file in the world folder and name it "
                               "relative to world.toml")
    path = (root / name).resolve()
    if path != root and not path.is_relative_to(root):
        raise WorldFolderError(f"{where}: {what} {shown(name)} resolves outside the world folder (through '..' "
                               "or a symbolic link); every path a world names must stay inside its folder. Fix: "
                               "copy the file into the world folder")
    if directory:
        if not path.is_dir():
            raise WorldFolderError(f"{where}: {what} {shown(name)} is not a folder inside the world folder. "
                                   "Fix: name an existing folder relative to world.toml")
        return path
    if not path.is_file():
        raise WorldFolderError(f"{where}: {what} {shown(name)} does not exist in the world folder. Fix: name a "
                               "file relative to world.toml")
    check_size(path, where)
    return path


def check_size(path: Path, where: str = "", limit: int = MAX_FILE_BYTES) -> int:
    """The file's size in bytes; refused above ``limit``."""
    size = path.stat().st_size
    if size > limit:
        raise WorldFolderError(f"{where or path}: {path.name} holds {size:,} bytes; a world folder's files hold at "
                               f"most {limit:,}. Fix: keep large data out of the world folder (or generate it "
                               "with a [data] generator)")
    return size


def confined_file(folder: Path, path: Path) -> Path:
    """``path`` (found inside ``folder``) resolved, refusing a symbolic link that points out of the folder."""
    resolved = path.resolve()
    if not resolved.is_relative_to(folder.resolve()):
        raise WorldFolderError(f"{path}: a symbolic link that points outside the world folder; every file a world "
                               "holds must be inside it. Fix: replace the link by the file itself")
    return resolved
