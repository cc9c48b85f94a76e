"""The docs site (mkdocs.yml, docs/, scripts/docs_hooks.py) and the short README.

`mkdocs build --strict` itself runs in .ci/run after the tests (a broken link or a missing page
fails it there); these tests check, fast and without mkdocs, what the build is made of: the config
reference generated from conf/ lists every option and field with its comments, results pages
linked as they lie in the repository reach the site, the nav names no page that is missing, and
the README stays short with links that exist.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap

import yaml

from support import CONF, ROOT

spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
hooks = sys.modules.setdefault("docs_hooks", importlib.util.module_from_spec(spec))
spec.loader.exec_module(hooks)

#: pages the hooks generate at build time (not files under docs/)
GENERATED = {"reference/config.md", "results.md"}


def _section(page: str, heading: str) -> str:
    start = page.index(heading)
    end = page.find("\n### ", start + len(heading))
    nxt = page.find("\n## ", start + len(heading))
    ends = [e for e in (end, nxt) if e != -1]
    return page[start:min(ends)] if ends else page[start:]


def test_the_config_reference_lists_every_option_and_its_fields():
    page = hooks.config_reference(CONF)
    files = sorted(p for p in CONF.rglob("*.yaml") if p.name != "config.yaml")
    assert len(files) > 50
    for f in files:
        group = f.parent.relative_to(CONF).as_posix()
        heading = (f"### `+experiment={f.stem}`" if group == "experiment" else f"### `{f.name}`" if group == "."
                   else f"### `{group}={f.stem}`")
        section = _section(page, heading)
        data = yaml.safe_load(f.read_text()) or {}
        for key in data:
            assert f"`{key}" in section, f"{f}: field {key} missing from the reference"
    bm25 = _section(page, "### `retriever=bm25` (default)")
    assert "| `backend` | `bm25s` | bm25s \\| rank_bm25 |" in bm25
    assert "BM25 (Okapi). Both backends rank identically; bm25s is the fast one." in bm25
    # a continued comment is one comment; the defaults of the primary config name their defaults
    server = _section(page, "### `server=llamacpp`")
    assert "F16/Q8_0/Q4_0 have llama.cpp's fast CPU prompt path, the packaged Q4_1 has not." in server
    assert "Options: `clapnq`" not in page and "Default: `clapnq`." in page
    assert "### `evaluator/checker=offline` (default)" in page


def test_a_new_option_is_in_the_reference_with_its_comments(tmp_path):
    """The reference is generated, so an option added to conf/ is in the next build."""
    (tmp_path / "config.yaml").write_text("defaults:\n  - widget: plain\n  - _self_\nseed: 0\n")
    (tmp_path / "widget").mkdir()
    (tmp_path / "widget" / "plain.yaml").write_text(textwrap.dedent("""\
        # A plain widget: the first line of its description.
        # The second line.
        #   ragsweep widget=plain widget.size=3
        _target_: my.Widget
        size: 2          # how many parts
                         # (a second line of the same comment)
        # the colour of the parts
        colour: "red"    # red | blue
        parts:
          - a            # the first part
          - b
        nested:
          depth: 1
        template: |-
          Q: {question}
          # not a comment: inside the template
        """))
    page = hooks.config_reference(tmp_path)
    section = _section(page, "### `widget=plain` (default)")
    assert "A plain widget: the first line of its description.\nThe second line." in section
    assert "\n    ragsweep widget=plain widget.size=3\n" in section  # a command in the description: code
    assert "| `size` | `2` | how many parts (a second line of the same comment) |" in section
    assert '| `colour` | `"red"` | the colour of the parts red \\| blue |' in section
    assert "| `parts` | `[a, b]` | `a`: the first part |" in section
    assert "| `nested.depth` | `1` |  |" in section
    assert "```text\nQ: {question}\n# not a comment: inside the template\n```" in section
    assert "| `_target_` | `my.Widget` |  |" in section  # the description is no field's comment


def test_links_to_results_are_rewritten_to_the_site():
    included = {"experiments/results/bench.md", "experiments/results/ui/shot.png"}
    md = ("[bench](../experiments/results/bench.md#cold) ![shot](../experiments/results/ui/shot.png) "
          "[page](statistics.md) [out](../src/ragsweep/types.py) [web](https://example.org/a.md)")
    got = hooks.rewrite_links(md, "docs/gpu.md", "gpu.md", included)
    assert got == ("[bench](experiments/results/bench.md#cold) ![shot](experiments/results/ui/shot.png) "
                   "[page](statistics.md) [out](../src/ragsweep/types.py) [web](https://example.org/a.md)")
    # from a page in a subfolder of the site, and from a results page back to a docs page
    assert hooks.rewrite_links("[b](../../experiments/results/bench.md)", "docs/reference/x.md",
                               "reference/x.md", included) == "[b](../experiments/results/bench.md)"
    assert hooks.rewrite_links("[s](../../docs/sweeps.md)", "experiments/results/bench.md",
                               "experiments/results/bench.md", included) == "[s](../../sweeps.md)"


def test_the_measured_results_join_the_site():
    files = hooks.result_files()
    assert "experiments/results/cpu_speed.md" in files and "experiments/meta_eval/README.md" in files
    assert "experiments/results/mlflow_ui/eval_table.png" in files
    index = hooks.results_index(ROOT, files)
    assert "[Generation speed on a CPU: the summary tables](experiments/results/cpu_speed.md)" in index


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for v in node for p in _nav_pages(v)]


def test_the_nav_names_only_pages_that_exist():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = _nav_pages(config["nav"])
    missing = [p for p in pages if p not in GENERATED and not (ROOT / "docs" / p).is_file()]
    assert not missing, missing
    assert "scripts/docs_hooks.py" in config["hooks"]
    # every page under docs/ is in the nav (a page nobody can reach is a page nobody reads)
    unlisted = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")
                      if p.relative_to(ROOT / "docs").as_posix() not in pages)
    assert not unlisted, unlisted


def test_the_readme_is_short_and_its_links_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#\s]+)", readme):
        if not re.match(r"^[a-z]+:", target):
            assert (ROOT / target).exists(), f"README links to {target}, which is not there"
    for command in ("bash scripts/setup.sh", "ragsweep dataset.limit=20", "\n    pytest\n", "mkdocs build --strict"):
        assert command in readme


def _resolves(name: str) -> bool:
    """``a.b.c`` is a module, or an attribute path inside the longest prefix that is one."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        mod = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            obj = importlib.import_module(mod)
            for p in parts[cut:]:
                if not hasattr(obj, p):
                    return False
                obj = getattr(obj, p)
            return True
    return False


def test_the_statistics_page_names_only_paths_and_modules_that_exist():
    """docs/statistics.md says where each rule lives: every file path and ``ragsweep.*`` name it
    gives exists (issue 50: it named module paths the package had moved away from)."""
    text = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    files = set(re.findall(r"`((?:src|tests|experiments|docs|scripts)/[\w./-]+\.(?:py|md|json))`", text))
    missing = sorted(f for f in files if not (ROOT / f).exists())
    absent = sorted(n for n in set(re.findall(r"`(ragsweep(?:\.\w+)+)", text)) if not _resolves(n))
    bare = sorted(set(re.findall(r"`([\w/]+\.py)`", text)) - files)
    assert not missing, f"docs/statistics.md names files that do not exist: {missing}"
    assert not absent, f"docs/statistics.md names modules that do not exist: {absent}"
    assert not bare, f"docs/statistics.md names files without their path from the repository root: {bare}"
    assert len(files) >= 8  # the check read the page's paths
