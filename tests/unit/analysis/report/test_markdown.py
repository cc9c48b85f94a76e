"""One Markdown cell helper for every page ragsweep writes."""

from ragsweep.analysis.report.markdown import md_cell
from ragsweep.pipeline import reproduce_page


def test_a_cell_never_splits_its_row():
    assert md_cell("barely moves (|step| <= 2)") == "barely moves (\\|step\\| <= 2)"
    assert md_cell("two\nlines") == "two lines"
    assert md_cell(0.5) == "0.5"


def test_the_reproduce_page_escapes_its_cells():
    entry = {"status": "finished", "wall_s": 10.0, "directions": [
        {"metric": "ragchecker/retriever/claim_recall", "param": "chunk_overlap", "expected": "barely moves (|step| <= 2)",
         "verdict": "NOT TESTABLE", "n": 20, "p": None, "n_for_80pct_power": None, "paper": "App. F", "detail": "",
         "step": "overlap=0 -> overlap=0.2", "diff": 1.0, "ci": [0.0, 2.0]}]}

    class Sweep:
        name, side, systems, questions = "ragchecker_overlap", "generation", 6, 20

        def command(self):
            return "ragsweep -m +experiment=ragchecker_overlap"

        def report_command(self):
            return "ragsweep-report --experiment ragchecker_overlap"

    page = reproduce_page.markdown([Sweep()], [entry], "ragsweep-reproduce", 10.0)
    row = next(line for line in page.splitlines() if line.startswith("| ragchecker_overlap | ragchecker/retriever"))
    assert "barely moves (\\|step\\| <= 2)" in row
    assert row.count(" | ") == 10  # eleven cells: the escaped pipes split nothing
