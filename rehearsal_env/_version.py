"""The package version (one home: the top-level package and provenance read it here)."""

__version__ = "0.1.0"
