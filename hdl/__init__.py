"""Amaranth description of a scaled-down LP30 tile (see docs/architecture.md)."""
