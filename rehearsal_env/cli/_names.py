"""The command line's two names, and whose ``rehearsal`` the PATH runs.

This package installs the same entry point as two console scripts: ``rehearsal`` and ``rehearsal-env``. Another
package on PyPI, ``rehearsal-kit``, installs a ``rehearsal`` script too, and whichever was installed last owns that
name. Our ``rehearsal`` cannot warn about it (when theirs owns the name, ours never runs), so ``rehearsal-env``
(the package's own name) looks at what ``rehearsal`` on PATH is and says so when it is not ours.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

NAMES = ("rehearsal", "rehearsal-env")
"""The console scripts of this package (the same entry point, ``rehearsal_env.cli:main``)."""
ENTRY = "rehearsal_env.cli"
"""What a console script of ours imports (pip writes it into the script)."""
HEAD_BYTES = 4096
"""How much of the script on PATH is read to recognise it (a console script is a few hundred bytes)."""


def invoked_as() -> str:
    """The name this process was started by: ``rehearsal-env`` when that script ran, else ``rehearsal``."""
    return NAMES[1] if Path(sys.argv[0]).name == NAMES[1] else NAMES[0]


def foreign_rehearsal(path: str | None = None) -> Path | None:
    """The ``rehearsal`` that ``path`` (default: ``$PATH``) runs, when it is not this package's entry point; None
    when it is ours or there is none."""
    found = shutil.which(NAMES[0], path=path if path is not None else os.environ.get("PATH"))
    if found is None:
        return None
    try:
        with open(found, "rb") as script:
            head = script.read(HEAD_BYTES)
    except OSError:
        return None
    return None if ENTRY.encode() in head else Path(found)


def collision_hint(path: str | None = None) -> str | None:
    """One line for stderr when ``rehearsal`` on PATH belongs to another package (None: nothing to say)."""
    found = foreign_rehearsal(path)
    if found is None:
        return None
    return (f"rehearsal-env: note: `rehearsal` on PATH ({found}) is another package's command (not "
            f"{ENTRY}:main; `rehearsal-kit` installs one too): run this package as `rehearsal-env`, or put its "
            f"folder ({Path(sys.executable).parent}) first on PATH")
