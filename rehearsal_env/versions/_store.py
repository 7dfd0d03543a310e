"""Published versions on disk: ``ROOT/<world>/<wv_id>/``, immutable, with append-only withdrawals.

A version folder holds:

* ``version.json``: the :class:`WorldVersion` (validation, facts); written once;
* ``content.json``: the world content the id hashes (anyone can re-hash it);
* ``withdrawn.json``: the :class:`Withdrawal` list, which only ever grows;
* ``builds.jsonl``: one line per build that reached this version (wall-clock
  time and seconds taken, recorded as such; not part of the version).

Writing a version whose folder exists with different content is refused
(:class:`VersionConflict`); writing identical content again is a no-op.
``ROOT`` is ``--out``, else ``$REHEARSAL_WORLD_VERSIONS``, else ``$REHEARSAL_HOME/world_versions``
(``~/.rehearsal/world_versions``; see :mod:`rehearsal_env._home`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from .._home import world_versions
from ..identity import canonical_json, content_hashes, version_id_of, world_version
from ..worlds import World, load_world
from ._manifest import Manifest, Withdrawal, WorldVersion

ROOT_ENV = "REHEARSAL_WORLD_VERSIONS"
DEFAULT_ROOT = "world_versions"
VERSION_FILE, CONTENT_FILE, WITHDRAWN_FILE, BUILDS_FILE = (
    "version.json", "content.json", "withdrawn.json", "builds.jsonl")


class VersionConflict(RuntimeError):
    """A published version's folder already holds different content; versions never change."""


class NotPublished(FileNotFoundError):
    """No published version where one was expected."""


def versions_root(root: str | Path | None = None) -> Path:
    """``root``, else ``$REHEARSAL_WORLD_VERSIONS``, else ``world_versions/`` in the state home
    (:func:`rehearsal_env._home.world_versions`: the same folder whatever the working directory)."""
    return Path(root) if root else world_versions()


def version_dir(world: str, version_id: str, root: str | Path | None = None) -> Path:
    return versions_root(root) / world / version_id


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def publish(version: WorldVersion, content: dict[str, Any],
            root: str | Path | None = None) -> tuple[Path, bool]:
    """Write ``version`` and its ``content``; return (folder, True) or (folder, False) when already identical.

    Raises:
        ValueError: ``content`` does not hash to ``version.id``.
        VersionConflict: the folder exists with different content.
    """
    if version_id_of(content_hashes(content)) != version.id:
        raise ValueError(f"the content hashes to {version_id_of(content_hashes(content))}, not {version.id}; "
                         "publish the content the version was built from")
    files = {VERSION_FILE: _pretty(version.to_dict()), CONTENT_FILE: canonical_json(content) + "\n"}
    folder = version_dir(version.world, version.id, root)
    if folder.exists():
        differing = [n for n, text in files.items()
                     if not (folder / n).exists() or (folder / n).read_text() != text]
        if differing:
            raise VersionConflict(
                f"{folder} already holds world version {version.id} with different {', '.join(differing)}; "
                "published versions are immutable. Expected the same content for the same id: the framework "
                "or the validation rules changed since. Publish under another --out folder, or bump the "
                "world's suite_version to make a new version")
        return folder, False
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version.id}.", dir=folder.parent))
    try:
        for name, text in files.items():
            (staging / name).write_text(text)
        (staging / WITHDRAWN_FILE).write_text(_pretty([]))
        os.replace(staging, folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if folder.exists():  # another build published it first; it must be identical
            return publish(version, content, root)
        raise
    return folder, True


def log_build(folder: Path, entry: dict[str, Any]) -> None:
    """Append one build's wall-clock facts to ``builds.jsonl``."""
    with (folder / BUILDS_FILE).open("a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def load_manifest(world: World | str, version_id: str | None = None,
                  root: str | Path | None = None) -> Manifest:
    """The published version ``version_id`` of ``world`` (default: its current version), with withdrawals.

    Raises:
        NotPublished: saying where it looked and how to build it.
    """
    if version_id is None:
        current = load_world(world) if isinstance(world, str) else world
        name, vid = current.name, world_version(current)
    else:
        name, vid = (world if isinstance(world, str) else world.name), version_id
    folder = version_dir(name, vid, root)
    if not (folder / VERSION_FILE).is_file():
        known = sorted(p.name for p in folder.parent.glob("wv_*")) if folder.parent.is_dir() else []
        raise NotPublished(f"world {name!r} version {vid} is not published under {versions_root(root)}"
                           f" (published there: {', '.join(known) or 'none'}); "
                           f"run `rehearsal world build {name}` first")
    version = WorldVersion.from_dict(json.loads((folder / VERSION_FILE).read_text()))
    return Manifest(version, _withdrawals(folder), folder)


def load_content(world: str, version_id: str, root: str | Path | None = None) -> dict[str, Any]:
    """The content (``content.json``) of the published version ``version_id`` of ``world``, re-hashed to its id.

    Raises:
        NotPublished: the version is not published under ``root``, saying where it looked.
        ValueError: the stored content does not hash to ``version_id`` (edited after publishing).
    """
    folder = version_dir(world, version_id, root)
    path = folder / CONTENT_FILE
    if not (folder / VERSION_FILE).is_file() or not path.is_file():
        raise NotPublished(f"world {world!r} version {version_id} is not published under {versions_root(root)}; "
                           f"run `rehearsal world build {world}` with the build that wrote it, or point "
                           f"--versions (${ROOT_ENV}) at the folder where it is published")
    content: dict[str, Any] = json.loads(path.read_text())
    if version_id_of(content_hashes(content)) != version_id:
        raise ValueError(f"{path} hashes to {version_id_of(content_hashes(content))}, not {version_id}: the "
                         "published content was changed after publishing; rebuild the version")
    return content


def _withdrawals(folder: Path) -> tuple[Withdrawal, ...]:
    path = folder / WITHDRAWN_FILE
    if not path.is_file():
        return ()
    return tuple(Withdrawal(**w) for w in json.loads(path.read_text()))


def withdraw(manifest: Manifest, withdrawals: list[Withdrawal]) -> Manifest:
    """Add ``withdrawals`` to the version's record (append-only); return the manifest as it now stands.

    Raises:
        KeyError: a scenario that is not in use in this version (unknown, kept out, or already withdrawn).
    """
    if manifest.path is None:
        raise ValueError("withdraw needs a manifest read from disk (load_manifest)")
    for w in withdrawals:
        if w.scenario not in manifest.in_use:
            why = manifest.not_in_use().get(w.scenario, "not a scenario of this version")
            raise KeyError(f"cannot withdraw {w.scenario!r} from {manifest.version.id}: "
                           f"it is not in use ({why})")
    current = _withdrawals(manifest.path)
    updated = [*current, *withdrawals]
    write_atomic(manifest.path / WITHDRAWN_FILE, _pretty([asdict(w) for w in updated]))
    return Manifest(manifest.version, tuple(updated), manifest.path)


def scenarios_not_in_use(world: World, root: str | Path | None = None) -> dict[str, str]:
    """``{scenario id: why}`` for the world's current version: kept out or withdrawn ({} when unpublished).

    This is what the runner asks before planning a run.
    """
    try:
        return load_manifest(world, root=root).not_in_use()
    except NotPublished:
        return {}
