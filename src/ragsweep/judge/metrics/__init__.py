"""Metrics: pure functions from results and labels to numbers."""
