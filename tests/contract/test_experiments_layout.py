"""experiments/ is grouped by kind (experiments/README.md): every script lives in a kind folder,
none at the top, and no script imports another script. A script is a file run as ``python
experiments/<kind>/<name>.py`` (it has an ``if __name__ == "__main__":`` block); what scripts share
lives in a library module beside them (no ``__main__``), which a script imports by its bare name
(the script's folder is on sys.path) or as ``experiments.<kind>.<module>``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support import ROOT

EXPERIMENTS = ROOT / "experiments"
KINDS = ("benchmarks", "simulations", "meta_eval", "ui_checks")
NOT_CODE = ("results", "data")  # measured outputs, and git-ignored downloaded data
#: where a command line or a docstring names an experiment script by its path
NAMING = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "mkdocs.yml", ROOT / "docs", ROOT / "experiments",
          ROOT / "src", ROOT / "tests", ROOT / "scripts", ROOT / "examples", ROOT / ".ci", ROOT / "conf"]
NAMING_SUFFIXES = {".md", ".py", ".sh", ".yaml", ".yml", ".toml", ".json", ".txt", ""}
#: from the repository root, or after ../ (a Markdown link); not tests/unit/experiments/...
SCRIPT_PATH = re.compile(r"(?:(?<=\.\./)|(?<![\w/.-]))experiments/[\w./-]+\.(?:py|sh)\b")


def python_files(root: Path = EXPERIMENTS) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in NOT_CODE)


def is_script(path: Path) -> bool:
    """A module-level ``if __name__ == "__main__":``."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        t = node.test if isinstance(node, ast.If) else None
        if isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__" \
                and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in t.comparators):
            return True
    return False


def _dotted(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_scripts(root: Path = EXPERIMENTS) -> dict[str, set[str]]:
    """module (path under root's parent) -> the scripts it imports, anywhere in its body. An import
    names a script by its dotted path (``experiments.simulations.ppi_coverage``, relative imports
    resolved) or by its bare name (``from ppi_coverage import x``, after a sys.path insert of any
    folder): a bare name that is the stem of a script in any experiments folder counts."""
    files = python_files(root)
    scripts = {p for p in files if is_script(p)}
    by_dotted = {_dotted(p, root): p for p in scripts}
    by_stem: dict[str, set[Path]] = {}
    for p in scripts:
        by_stem.setdefault(p.stem, set()).add(p)
    out: dict[str, set[str]] = {}
    for path in files:
        here = _dotted(path, root)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = here if path.name == "__init__.py" else here.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                names.add(base)
                names.update(f"{base}.{a.name}" for a in node.names)
        found: set[Path] = set()
        for name in names:
            if name in by_dotted:
                found.add(by_dotted[name])
            elif "." not in name:
                found |= by_stem.get(name, set())
        found.discard(path)
        if found:
            out[str(path.relative_to(root.parent))] = {str(p.relative_to(root.parent)) for p in found}
    return out


def named_paths(roots: list[Path] = NAMING) -> dict[str, set[str]]:
    """experiments/... .py or .sh paths named in the repository's text files -> the files naming them."""
    files: list[Path] = []
    for r in roots:
        if r.is_file():
            files.append(r)
        elif r.is_dir():
            files += [p for p in r.rglob("*") if p.is_file() and p.suffix in NAMING_SUFFIXES
                      and not set(p.relative_to(ROOT).parts) & {"data", "__pycache__", "tmp"}]
    out: dict[str, set[str]] = {}
    for f in files:
        if f == Path(__file__).resolve():
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for m in SCRIPT_PATH.findall(text):
            out.setdefault(m.rstrip("."), set()).add(str(f.relative_to(ROOT)))
    return out


def test_no_python_file_at_the_top_of_experiments():
    top = sorted(p.name for p in EXPERIMENTS.glob("*.py"))
    assert not top, f"move these into a kind folder ({', '.join(KINDS)}) and list them in experiments/README.md: {top}"


def test_every_script_lives_in_a_kind_folder():
    stray = [str(p.relative_to(ROOT)) for p in python_files() if p.relative_to(EXPERIMENTS).parts[0] not in KINDS]
    assert not stray, f"not in a kind folder ({', '.join(KINDS)}): {stray}"


def test_each_kind_folder_is_there_and_described_in_the_readme():
    readme = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    for kind in KINDS:
        assert (EXPERIMENTS / kind).is_dir(), kind
        assert f"{kind}/" in readme, f"experiments/README.md does not describe {kind}/"
    for p in python_files():
        if is_script(p):
            assert p.name in readme, f"experiments/README.md has no line for {p.relative_to(EXPERIMENTS)}"


def test_no_experiment_script_is_imported_by_another_module():
    found = imported_scripts()
    assert not found, ("a script is imported (move what they share into a library module beside them, "
                       f"one without __main__): {found}")


def test_every_experiment_path_named_in_the_repository_exists():
    """Docs, result pages, docstrings and tests name scripts as ``python experiments/<kind>/<script>.py``:
    a path left from before a move (``experiments/bench_generation.py``) is a command that fails."""
    named = named_paths()
    missing = {p: sorted(where) for p, where in named.items() if not (ROOT / p).exists()}
    assert not missing, f"no such file (moved? see experiments/README.md): {missing}"
    assert "experiments/benchmarks/bench_generation.py" in named  # the check read the docs


def test_the_import_check_finds_each_way_of_importing_a_script(tmp_path):
    root = tmp_path / "experiments"
    (root / "benchmarks").mkdir(parents=True)
    (root / "simulations").mkdir()
    main = 'if __name__ == "__main__":\n    pass\n'
    (root / "benchmarks" / "bench_a.py").write_text("def f():\n    from bench_b import g\n" + main)
    (root / "benchmarks" / "bench_b.py").write_text("def g():\n    pass\n" + main)
    (root / "benchmarks" / "common.py").write_text("def h():\n    pass\n")
    (root / "benchmarks" / "bench_c.py").write_text("from common import h\n" + main)  # a library: fine
    (root / "simulations" / "sim_a.py").write_text("from experiments.benchmarks.bench_b import g\n" + main)
    (root / "simulations" / "sim_b.py").write_text("from experiments.benchmarks import bench_c\n" + main)
    (root / "simulations" / "sim_c.py").write_text("def f():\n    return 1\n")
    (root / "simulations" / "sim_d.py").write_text("from . import sim_a\n")
    assert not is_script(root / "benchmarks" / "common.py") and is_script(root / "benchmarks" / "bench_b.py")
    assert imported_scripts(root) == {
        "experiments/benchmarks/bench_a.py": {"experiments/benchmarks/bench_b.py"},
        "experiments/simulations/sim_a.py": {"experiments/benchmarks/bench_b.py"},
        "experiments/simulations/sim_b.py": {"experiments/benchmarks/bench_c.py"},
        "experiments/simulations/sim_d.py": {"experiments/simulations/sim_a.py"},
    }
