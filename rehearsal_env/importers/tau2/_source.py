"""A tau2-bench source folder: its files, each pinned by SHA-256, and what differs from tau2-bench itself."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOMAINS = ("airline", "retail")
FILES = ("db.json", "tasks.json", "policy.md", "split_tasks.json")
"""The files of one domain, under ``data/tau2/domains/<domain>/``."""
TAU2_COMMIT = "a2c0247"
PINNED: dict[str, str | None] = {
    "retail/db.json": "413a65160adbdb5fde0ffc0015c49b6d70250b10c18128de169b597af7766765",
    "retail/tasks.json": "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8",
    "retail/policy.md": "2c9652afbce57d6e087768d37cda64d31c53d50b3e3225cfdb791bac66466467",
    "retail/split_tasks.json": "ed0580ec52575b63fbf76568af42490da6ee7783ecb4aa81af46961291358f20",
    "airline/db.json": None,
    "airline/tasks.json": "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052",
    "airline/policy.md": "10dc0525421521208be39cee235bba84a16e2bcba9899eb93d92cd81d2f62fc4",
    "airline/split_tasks.json": "b22ced4d9a9850ac9aea31c53bdcb6d6009058140bd9acc7db37c1d36222ba8b",
}
"""SHA-256 of each file in tau2-bench at :data:`TAU2_COMMIT` (None: not known here)."""
TAU2_AIRLINE_DB_CHARS = 7_042_249
"""Length of tau2-bench's own airline ``db.json``, whose hash is not pinned here."""


class SourceError(ValueError):
    """The source folder is not a tau2-bench checkout, or changed since it was imported."""


@dataclass(frozen=True)
class SourceFile:
    """One pinned file of the source folder."""

    name: str
    """``domain/file``, e.g. ``retail/db.json``."""
    sha256: str
    """SHA-256 of its bytes as found."""
    size: int
    """Its size in bytes."""
    status: str
    """``pinned`` (equal to tau2-bench at the pinned commit), ``differs`` or ``unpinned``."""
    note: str
    """What the status means for this file, in words."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "size": self.size, "status": self.status,
                "note": self.note}


def domain_dir(source: Path, domain: str) -> Path:
    return source / "data" / "tau2" / "domains" / domain


def pin(source: Path, domain: str) -> tuple[SourceFile, ...]:
    """Hash every file of ``domain`` in ``source`` and compare with tau2-bench's own.

    Raises:
        SourceError: a file is missing (the folder is not a tau2-bench checkout).
    """
    out = []
    for file in FILES:
        path = domain_dir(source, domain) / file
        if not path.is_file():
            raise SourceError(f"{path} is missing: --source must be a tau2-bench checkout (or a copy with its "
                              f"data/tau2/domains/<domain>/ layout); expected {', '.join(FILES)} there")
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        name = f"{domain}/{file}"
        want = PINNED.get(name)
        if want == sha:
            status, note = "pinned", f"identical to tau2-bench at {TAU2_COMMIT}"
        elif want is not None:
            status, note = "differs", f"differs from tau2-bench at {TAU2_COMMIT} (sha256 {want[:12]}...)"
        elif name == "airline/db.json":
            chars = len(data.decode())
            status = "unpinned" if chars == TAU2_AIRLINE_DB_CHARS else "differs"
            note = (f"{chars:,} characters; tau2-bench's own file at {TAU2_COMMIT} has {TAU2_AIRLINE_DB_CHARS:,} "
                    + ("(same length, hash not pinned: cannot certify equality)" if status == "unpinned"
                       else "(a rebuilt airline db: scores are close to, not certified equal to, tau2's)"))
        else:
            status, note = "unpinned", "no tau2-bench hash is pinned for this file"
        out.append(SourceFile(name, sha, len(data), status, note))
    return tuple(out)


def manifest_hash(files: tuple[SourceFile, ...]) -> str:
    """One SHA-256 over every file's name and hash (the world version covers it)."""
    text = json.dumps([[f.name, f.sha256] for f in files], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def load_json(source: Path, domain: str, file: str) -> Any:
    return json.loads((domain_dir(source, domain) / file).read_text())
