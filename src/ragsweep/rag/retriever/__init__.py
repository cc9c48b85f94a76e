"""Retrievers and their indexes."""
