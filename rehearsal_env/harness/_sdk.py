"""Which MCP Python SDK is installed, checked before anything of it is imported.

``rehearsal mcp`` and this package are written against the SDK 2.x (the low-level server's ``on_*`` handlers,
per-connection state, the dual-era wire: the initialize handshake and the stateless 2026-07-28 revision). An SDK
outside :data:`SUPPORTED` is refused by name and version, so that a user with the SDK installed is not told to
install it again.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

SUPPORTED = (2, 3)
"""The SDK majors this package runs on: ``>= 2.0, < 3`` (the ``mcp`` extra's range)."""
RANGE = f">={SUPPORTED[0]}.0,<{SUPPORTED[1]}"
""":data:`SUPPORTED` as a requirement specifier."""


class SdkMissing(ImportError):
    """The ``mcp`` package is not installed."""


class SdkUnsupported(ImportError):
    """The installed ``mcp`` package is outside :data:`SUPPORTED`."""


def check_sdk() -> str:
    """The installed SDK's version.

    Raises:
        SdkMissing: no ``mcp`` package is installed.
        SdkUnsupported: its version is outside :data:`SUPPORTED`.
    """
    try:
        found = version("mcp")
    except PackageNotFoundError:
        raise SdkMissing(f"the MCP Python SDK (the mcp package, {RANGE}) is not installed; "
                         f"pip install 'rehearsal-env[mcp]'", name="mcp") from None
    head = found.split(".")[0]
    major = int(head) if head.isdigit() else -1
    if not SUPPORTED[0] <= major < SUPPORTED[1]:
        raise SdkUnsupported(f"expected the MCP Python SDK (the mcp package) {RANGE}, found mcp {found}; "
                             f"pip install 'mcp{RANGE}' (the mcp extra: pip install 'rehearsal-env[mcp]')")
    return found
