"""The Docker sandbox: a world's application, its database and the outside-service emulators as containers.

``open_database(world, "docker")`` (``--backend docker``) returns a
:class:`SandboxDatabase`: an internal Docker network with the world's
PostgreSQL, the emulators and the application, started once and reset in
milliseconds by the PostgreSQL backend's row-level restore. Images are built
from Debian packages with debootstrap and tagged by their recipe's hash
(:mod:`._images`); nothing is pulled from a registry. Build them ahead (an
installation step: debootstrap downloads Debian packages from the mirror) with
``python -m rehearsal_env.sandbox``.
"""

from ._database import SandboxDatabase, SandboxFailed
from ._docker import LABEL, SandboxError, clean_leftovers, docker_available, ours_left, remove_ours
from ._images import BuiltImage, base_image, base_image_built, folder_image
from ._isolation import SandboxFact, measure_isolation

__all__ = [
    "LABEL",
    "BuiltImage",
    "SandboxDatabase",
    "SandboxError",
    "SandboxFailed",
    "SandboxFact",
    "base_image",
    "base_image_built",
    "clean_leftovers",
    "docker_available",
    "folder_image",
    "measure_isolation",
    "ours_left",
    "remove_ours",
]
