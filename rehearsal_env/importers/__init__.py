"""Importers: worlds made from someone else's benchmark, read in place from the user's own copy."""
