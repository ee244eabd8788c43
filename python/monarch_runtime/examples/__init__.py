"""Runnable examples: ``python -m monarch_runtime.examples.peer_recovery``."""
