"""``python -m rehearsal_env.sandbox``: build the sandbox images ahead of use (base, emulator, shipped apps).

The base image comes from debootstrap (it downloads Debian packages from
``$REHEARSAL_DEBIAN_MIRROR``, default deb.debian.org): an installation step, like
``apt-get install``, that CI runs before the tests. Built images are reused by
their recipe hash, so a second run only checks them.
"""

from __future__ import annotations

from ..worlds import application_of, load_world, world_names
from ._images import base_image, folder_image
from ._sandbox import EMULATOR


def main() -> None:
    built = [("base", base_image()), ("emulator", folder_image("emulator", EMULATOR, target="/emulator"))]
    for name in world_names():
        app = application_of(load_world(name))
        if app is not None:
            built.append((f"app-{name}", folder_image(f"app-{name}", app.folder)))
    for name, image in built:
        how = f"built in {image.seconds:.1f}s" if image.built else "already built"
        print(f"{name:<16} {image.tag}  {how}")


if __name__ == "__main__":
    main()
