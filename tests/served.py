"""A ``rehearsal serve`` started by a test in a child process: the address it prints first."""

from __future__ import annotations

import subprocess


def listening_url(proc: subprocess.Popen[str]) -> str:
    """The address a server started with ``--port 0`` prints first ("listening on URL"), e.g. ``http://127.0.0.1:N``."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on" in line, f"expected the server's first line to say 'listening on URL', got {line!r}"
    return line.split("listening on ")[1].split()[0]
