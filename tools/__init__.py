"""Porting tools for maintainers: run as ``python -m tools <command>``."""
