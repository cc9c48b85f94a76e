"""Hydra config tree of ragsweep (also reachable as conf/ at the repository root)."""
