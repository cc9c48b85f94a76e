"""The package by stage (docs/architecture.md): a module imports only its own stage or an earlier
one, so one job reads top to bottom (corpus -> rag -> judge -> tracking -> analysis -> pipeline, over the store) and
no stage reaches back up. Function-level imports count as much as module-level ones."""

from __future__ import annotations

from pathlib import Path

from test_codebase_shape import PACKAGE, import_graph

#: earliest first. The shared root (types, records, errors, signals, the config tree) and the
#: store (the cache) are reached by every stage; tracking logs what the judge made and the
#: analysis reads it back.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("shared", ("ragsweep.types", "ragsweep.records", "ragsweep.errors", "ragsweep.signals", "ragsweep.conf")),
    ("store", ("ragsweep.store",)),
    ("corpus", ("ragsweep.corpus",)),
    ("rag", ("ragsweep.rag",)),
    ("judge", ("ragsweep.judge",)),
    ("tracking", ("ragsweep.tracking",)),
    ("analysis", ("ragsweep.analysis",)),
    ("pipeline", ("ragsweep.pipeline",)),
    # the package's face: the Python API, which may reach every stage; no stage imports it
    ("api", ("ragsweep",)),
]


def stage_of(module: str) -> int:
    """Index in STAGES of the longest prefix that names ``module``."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(STAGES):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise AssertionError(f"{module} is in no stage: add it to a stage folder (docs/architecture.md)")
    return best


def backward_imports(root: Path = PACKAGE) -> list[str]:
    out = []
    for mod, deps in sorted(import_graph(root).items()):
        for dep in sorted(deps):
            if stage_of(dep) > stage_of(mod):
                out.append(f"{mod} ({STAGES[stage_of(mod)][0]}) imports {dep} ({STAGES[stage_of(dep)][0]})")
    return out


def test_every_import_runs_down_the_stages():
    wrong = backward_imports()
    assert not wrong, "imports against the stage order (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_root_holds_only_the_stage_folders_and_the_shared_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    shared = sorted(p.rpartition(".")[2] + ".py" for p in STAGES[0][1] if p != "ragsweep.conf")
    assert loose == shared
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    assert folders == ["analysis", "conf", "corpus", "judge", "pipeline", "rag", "store", "tracking"]


def test_a_wrong_import_is_caught(tmp_path):
    """The check itself: a retriever that reaches up into the report fails it."""
    pkg = tmp_path / "ragsweep"
    for d in ("rag/retriever", "analysis/report"):
        (pkg / d).mkdir(parents=True)
    for init in ("", "rag", "rag/retriever", "analysis", "analysis/report"):
        (pkg / init / "__init__.py").write_text("")
    (pkg / "analysis" / "report" / "table.py").write_text("def render():\n    return ''\n")
    (pkg / "rag" / "retriever" / "bm25.py").write_text("def f():\n    from ragsweep.analysis.report.table import render\n")
    assert backward_imports(pkg) == [
        "ragsweep.rag.retriever.bm25 (rag) imports ragsweep.analysis.report.table (analysis)"]
    # and the same import the other way round is allowed
    (pkg / "rag" / "retriever" / "bm25.py").write_text("X = 1\n")
    (pkg / "analysis" / "report" / "table.py").write_text("from ragsweep.rag.retriever.bm25 import X\n")
    assert backward_imports(pkg) == []


def test_the_unit_tests_mirror_the_package():
    unit = PACKAGE.parents[1] / "tests" / "unit"
    stray = sorted(p.name for p in unit.iterdir()
                   if p.is_dir() and not p.name.startswith(("_", ".")) and p.name != "experiments"
                   and not (PACKAGE / p.name).is_dir())
    loose = sorted(p.name for p in unit.glob("test_*.py") if not (PACKAGE / f"{p.stem[5:]}.py").is_file())
    assert not stray and not loose, f"tests/unit/ mirrors src/ragsweep/ (folders {stray}, files {loose})"
