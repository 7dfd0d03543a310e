"""A world's identity: its content as canonical JSON and the ``wv_`` id that hashes it.

Identity is a property of the world alone (schema, seed manifest, tools and their code, roles,
policies, scenarios, reward profiles), so it lives below everything that cites it: provenance
blobs, records and the world versions that :mod:`rehearsal_env.versions` builds and publishes.
"""

from ._content import (
    CONTENT_FORMAT,
    ID_HEX_CHARS,
    VERSION_PREFIX,
    canonical_json,
    content_hashes,
    sha256_text,
    version_id_of,
    world_content,
    world_version,
)

__all__ = [
    "CONTENT_FORMAT",
    "ID_HEX_CHARS",
    "VERSION_PREFIX",
    "canonical_json",
    "content_hashes",
    "sha256_text",
    "version_id_of",
    "world_content",
    "world_version",
]
