"""Images without a registry: a Debian root filesystem from ``debootstrap``, imported into Docker.

Nothing is pulled. The base image is ``debootstrap --variant=minbase`` of Debian
with the packages every sandbox container needs (PostgreSQL, Python with
psycopg2, libfaketime, iproute2), written to a folder, tarred and ``docker
import``-ed. An application image is ``FROM`` that base with the world's
``app/`` folder copied in (``docker build``, which finds the base locally).

Every image is tagged by the SHA-256 of its *recipe* (the base: suite, variant,
packages and this module's build steps; an application image: the base's tag
and every file of the folder), so a built image is found and reused, and a
changed recipe builds a new one. Builds of one recipe are serialized across
processes with a file lock.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from ._docker import LABEL, SandboxError, docker_client

SUITE = "bookworm"
VARIANT = "minbase"
PACKAGES = ("postgresql", "python3", "python3-psycopg2", "libfaketime", "iproute2")
"""What the base image holds: the database server, the application runtime, the clock, the routes."""
MIRROR_ENV = "REHEARSAL_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BUILD_STEPS = 2
"""Bumped whenever the way the root filesystem is made changes (part of the recipe)."""
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Where Debian's libfaketime lands in the image (LD_PRELOAD it to move the clock)."""


@dataclass(frozen=True)
class BuiltImage:
    """An image the sandbox runs, as built (or found) here."""

    tag: str
    """``repository:recipe-hash``."""
    recipe: str
    """The full SHA-256 of the recipe."""
    built: bool
    """True when this call built it; False when it was already there."""
    seconds: float
    """Build time (0 when reused)."""


def base_recipe() -> dict[str, Any]:
    """The base image's recipe: what decides its content."""
    return {"suite": SUITE, "variant": VARIANT, "packages": list(PACKAGES), "steps": BUILD_STEPS}


def recipe_hash(recipe: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _lock(recipe: str) -> FileLock:
    return FileLock(str(Path(tempfile.gettempdir()) / f"rehearsal-image-{recipe[:16]}.lock"), timeout=1800)


def _exists(tag: str) -> bool:
    import docker.errors

    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def base_tag() -> str:
    """The base image's tag (its recipe's hash)."""
    return f"rehearsal/sandbox-base:{recipe_hash(base_recipe())[:16]}"


def base_image_built() -> bool:
    """Whether the base image of the current recipe is already in the daemon (building it downloads Debian)."""
    return _exists(base_tag())


def base_image() -> BuiltImage:
    """The base image, built with debootstrap on first use (about a minute or three)."""
    import time

    recipe = recipe_hash(base_recipe())
    tag = base_tag()
    if _exists(tag):
        return BuiltImage(tag, recipe, False, 0.0)
    with _lock(recipe):
        if _exists(tag):
            return BuiltImage(tag, recipe, False, 0.0)
        started = time.perf_counter()
        _build_base(tag, recipe)
        return BuiltImage(tag, recipe, True, time.perf_counter() - started)


def _build_base(tag: str, recipe: str) -> None:
    if shutil.which("debootstrap") is None:
        raise SandboxError("building the sandbox base image needs debootstrap, which is not installed; "
                           "install it (Debian: apt-get install debootstrap) and run again")
    mirror = os.environ.get(MIRROR_ENV, DEFAULT_MIRROR)
    work = Path(tempfile.mkdtemp(prefix="rehearsal-rootfs-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    root = work / "rootfs"
    try:
        cmd = ["debootstrap", f"--variant={VARIANT}", f"--include={','.join(PACKAGES)}", SUITE, str(root), mirror]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise SandboxError(f"debootstrap failed ({' '.join(cmd)}): {' | '.join(tail)}. Check the mirror "
                               f"(${MIRROR_ENV}, default {DEFAULT_MIRROR}) and that this user may chroot")
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(root / leftover, ignore_errors=True)
        archive = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(archive), "."], check=True)
        repository, version = tag.split(":")
        changes = [f'LABEL {LABEL}="image" rehearsal.recipe="{recipe}"', 'CMD ["/bin/bash"]']
        docker_client().api.import_image_from_file(str(archive), repository=repository, tag=version,
                                                   changes=changes)
        if not _exists(tag):
            raise SandboxError(f"docker import did not produce {tag}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def folder_recipe(base: BuiltImage, folder: Path, extra: dict[str, Any]) -> str:
    """The recipe hash of an image ``FROM base`` holding ``folder``'s files (and ``extra`` settings)."""
    h = hashlib.sha256()
    h.update(base.recipe.encode())
    h.update(json.dumps(extra, sort_keys=True).encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def folder_image(name: str, folder: Path, *, target: str = "/app") -> BuiltImage:
    """An image ``FROM`` the base with ``folder`` copied to ``target`` (built once per recipe)."""
    import time

    base = base_image()
    recipe = folder_recipe(base, folder, {"target": target})
    tag = f"rehearsal/{name}:{recipe[:16]}"
    if _exists(tag):
        return BuiltImage(tag, recipe, False, 0.0)
    with _lock(recipe):
        if _exists(tag):
            return BuiltImage(tag, recipe, False, 0.0)
        started = time.perf_counter()
        context = io.BytesIO()
        dockerfile = (f"FROM {base.tag}\nCOPY content {target}\n"
                      f'LABEL {LABEL}="image" rehearsal.recipe="{recipe}"\n').encode()
        with tarfile.open(fileobj=context, mode="w") as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))
            tar.add(str(folder), arcname="content",
                    filter=lambda t: None if "__pycache__" in t.name else t)
        context.seek(0)
        import docker.errors

        try:
            docker_client().images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                         forcerm=True, pull=False)
        except docker.errors.BuildError as exc:
            raise SandboxError(f"building image {tag} from {folder} failed: {exc}") from exc
        return BuiltImage(tag, recipe, True, time.perf_counter() - started)
