"""World versions: the ``wv_`` content id, scenario validation, manifests, withdrawals, world pages."""

from ._content import content_hashes, world_content, world_version

__all__ = ["content_hashes", "world_content", "world_version"]
