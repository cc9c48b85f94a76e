"""Placeholder package for the stage layout; filled when the package moves by stage."""
