"""Markdown table cells, shared by every page ragsweep writes (the report's tables, the compare and
direction pages, ``ragsweep-reproduce``'s page, ``verdicts_by_judge``): one rule for what a cell may
hold."""

from __future__ import annotations

from typing import Any


def md_cell(x: Any) -> str:
    """``x`` as one Markdown table cell: a ``|`` escaped (a cell such as ``|step| <= 2`` would split
    the row), a newline made a space."""
    return str(x).replace("|", "\\|").replace("\n", " ")
