"""MkDocs hooks (``hooks:`` in mkdocs.yml): the parts of the docs site built from the repository.

1. ``reference/config.md``: every config group under ``conf/``, its options, each option's fields
   with their defaults and the YAML comments beside them, written at every build from the YAML
   files themselves, so the reference cannot drift from the configs.
2. The measured results: every Markdown page under ``experiments/`` and the images, text and JSON
   under ``experiments/results/`` and ``experiments/meta_eval/results/`` join the site at the same
   paths, with a generated index (``results.md``). A docs page links to a result as it lies in the
   repository (``../experiments/results/bench_generation.md``, which GitHub follows too); the link
   is rewritten to the page in the site, so ``mkdocs build --strict`` checks every such link.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: where the included pages and files come from (paths in the site are the same)
RESULTS_MD = "experiments"
RESULTS_ASSETS = ("experiments/results", "experiments/meta_eval/results")
ASSET_SUFFIXES = {".png", ".txt", ".json", ".csv", ".svg"}
#: the groups in the order of one job; any other group follows, by name
GROUP_ORDER = ["dataset", "chunker", "retriever", "reranker", "prompt", "generator", "server", "evaluator",
               "evaluator/extractor", "evaluator/checker", "experiment"]
#: a mapping with more leaves than this is summarised, not listed (an experiment's expected results)
MAX_LEAVES = 24


# ---- the config reference -------------------------------------------------------------------------
@dataclass
class Field:
    name: str
    value: str  # as written in the YAML (a block scalar: its text)
    comment: str = ""
    block: bool = False  # a multi-line string, shown below the table


@dataclass
class Option:
    group: str
    name: str
    path: str
    description: str
    fields: list[Field] = field(default_factory=list)


def _comment_lines(lines: list[str], taken: set[int]) -> dict[int, tuple[int, str]]:
    """Line number -> (column of its '#', text) for every line that is only a comment."""
    out = {}
    for i, line in enumerate(lines):
        s = line.lstrip()
        if i not in taken and s.startswith("#") and not s.startswith("# @package"):
            out[i] = (len(line) - len(s), s[1:].strip())
    return out


def _inline(line: str, after: int) -> str:
    """The comment on ``line`` after column ``after`` (a '#' that follows white space)."""
    m = re.search(r"\s#(.*)$", line[after:])
    return m.group(1).strip() if m else ""


class _Reader:
    """The fields of one YAML file with their comments (PyYAML's node marks locate both)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines()
        self.root = yaml.compose(text)
        taken: set[int] = set()
        for node in self._nodes(self.root):
            if isinstance(node, yaml.ScalarNode) and node.start_mark.line != node.end_mark.line:
                taken.update(range(node.start_mark.line + 1, node.end_mark.line + 1))
        self.comments = _comment_lines(self.lines, taken)

    def _nodes(self, node):
        yield node
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                yield from self._nodes(k)
                yield from self._nodes(v)
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                yield from self._nodes(v)

    def description(self) -> str:
        """The comment at the top of the file, as Markdown: its lines indented further (commands)
        become a code block. Its lines are no field's comment."""
        first = min((k.start_mark.line for k, _ in self.root.value), default=len(self.lines)) if self.root else 0
        raw: list[str] = []
        for i in range(first):
            if i in self.comments:
                text = self.lines[i].lstrip()[1:]
                raw.append(text[1:] if text.startswith(" ") else text)
                del self.comments[i]
            elif raw and not self.lines[i].strip():
                break
        out: list[str] = []
        for line in raw:
            code = line.startswith("  ")
            if code and (not out or not out[-1].startswith("    ")):
                out.append("")
            elif not code and out and out[-1].startswith("    "):
                out.append("")
            out.append("    " + line.strip() if code else line.strip())
        while out and not out[-1]:
            out.pop()
        return "\n".join(out)

    def _head(self, line: int, col: int) -> list[str]:
        """Comment lines directly above ``line`` at the key's column (the key's own comment)."""
        out, i = [], line - 1
        while i in self.comments and self.comments[i][0] == col:
            out.insert(0, self.comments[i][1])
            i -= 1
        return out

    def _tail(self, line: int, col: int, after: int) -> list[str]:
        """The inline comment on ``line`` and the comment lines under it that stay to the right of
        the key (unless they stand at the column of the next key: then they are that key's)."""
        out = [_inline(self.lines[line], after)] if line < len(self.lines) else []
        i = line + 1
        while i in self.comments and self.comments[i][0] > col:
            j = i
            while j in self.comments:
                j += 1
            nxt = self.lines[j] if j < len(self.lines) else ""
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) == self.comments[i][0]:
                break
            out.append(self.comments[i][1])
            i += 1
        return [c for c in out if c]

    def _comment(self, key: yaml.Node, value: yaml.Node) -> str:
        col, line = key.start_mark.column, key.start_mark.line
        after = value.end_mark.column if isinstance(value, yaml.ScalarNode) and value.end_mark.line == line \
            else key.end_mark.column
        if isinstance(value, yaml.SequenceNode) and value.flow_style and value.end_mark.line == line:
            after = value.end_mark.column
        return " ".join(self._head(line, col) + self._tail(line, col, after))

    def _raw(self, node: yaml.Node) -> str:
        return self.text[node.start_mark.index:node.end_mark.index].strip()

    def fields(self, node=None, prefix: str = "") -> list[Field]:
        node = self.root if node is None else node
        if not isinstance(node, yaml.MappingNode):
            return []
        out: list[Field] = []
        for k, v in node.value:
            name, comment = prefix + str(k.value), self._comment(k, v)
            if isinstance(v, yaml.ScalarNode):
                block = v.style in ("|", ">")
                out.append(Field(name, v.value if block else self._raw(v), comment, block))
            elif isinstance(v, yaml.MappingNode):
                leaves = sum(1 for n in self._nodes(v) if isinstance(n, yaml.ScalarNode)) // 2
                if leaves > MAX_LEAVES or not v.value:
                    out.append(Field(name, "{}" if not v.value else f"(a mapping of {leaves} values: see the file)", comment))
                else:
                    if comment:
                        out.append(Field(name, "", comment))
                    out.extend(self.fields(v, name + "."))
            else:
                out.append(self._sequence(name, v, comment))
        return out

    def _sequence(self, name: str, node: yaml.SequenceNode, comment: str) -> Field:
        items, notes = [], []
        for item in node.value:
            if isinstance(item, yaml.ScalarNode):
                text = self._raw(item)
            elif isinstance(item, yaml.MappingNode) and len(item.value) == 1 and isinstance(item.value[0][1], yaml.ScalarNode):
                text = f"{item.value[0][0].value}: {self._raw(item.value[0][1])}"
            else:
                return Field(name, f"(a list of {len(node.value)} entries: see the file)", comment)
            items.append(text)
            line, end = item.start_mark.line, item if isinstance(item, yaml.ScalarNode) else item.value[0][1]
            note = _inline(self.lines[line], end.end_mark.column) if end.end_mark.line == line else ""
            if note and not node.flow_style:
                notes.append(f"`{text}`: {note}")
        return Field(name, "[" + ", ".join(items) + "]", "; ".join(c for c in [comment] + notes if c))


def read_option(path: Path, group: str) -> Option:
    reader = _Reader(path.read_text(encoding="utf-8"))
    return Option(group, path.stem, path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path),
                  reader.description(), reader.fields())


def _defaults(conf: Path) -> dict[str, str]:
    """group -> its default option (config.yaml's defaults, and those of a group's default option)."""
    out: dict[str, str] = {}

    def take(entries, base: str) -> None:
        for e in entries or []:
            if isinstance(e, dict):
                for k, v in e.items():
                    k = str(k)
                    if not k.startswith(("override", "/")) and "@" not in k and isinstance(v, str):
                        out.setdefault(f"{base}{k}", v)

    take(yaml.safe_load((conf / "config.yaml").read_text()).get("defaults"), "")
    for group, option in list(out.items()):
        f = conf / group / f"{option}.yaml"
        if f.is_file():
            take((yaml.safe_load(f.read_text()) or {}).get("defaults"), f"{group}/")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    if not text:
        return ""
    tick = "``" if "`" in text else "`"
    pad = " " if tick == "``" else ""
    return f"{tick}{pad}{_cell(text)}{pad}{tick}"


def _render_option(opt: Option, heading: str, default: bool) -> list[str]:
    out = [f"### {heading}" + (" (default)" if default else ""), ""]
    if opt.description:
        out += [opt.description, ""]
    out += [f"File: `{opt.path}`", ""]
    rows = [f for f in opt.fields if not f.block]
    if rows:
        out += ["| field | default | comment |", "|---|---|---|"]
        out += [f"| `{f.name}` | {_code(f.value)} | {_cell(f.comment)} |" for f in rows]
        out.append("")
    for f in opt.fields:
        if f.block:
            out += [f"`{f.name}`" + (f": {f.comment}" if f.comment else ""), "", "```text", f.value.rstrip("\n"), "```", ""]
    return out


def config_reference(conf: Path) -> str:
    """The config reference page, from every YAML file under ``conf``."""
    groups: dict[str, list[Path]] = {}
    for f in sorted(conf.rglob("*.yaml")):
        rel = f.parent.relative_to(conf).as_posix()
        if rel != ".":
            groups.setdefault(rel, []).append(f)
    order = sorted(groups, key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g))
    defaults = _defaults(conf)
    out = ["# Config reference", "",
           "Generated from `conf/` at every docs build (`scripts/docs_hooks.py`): every config group, its",
           "options, each option's fields with their defaults and the comments written beside them in the",
           "YAML. Pick an option with `GROUP=OPTION` (`+experiment=NAME` for a ready sweep) and set a field",
           "with `GROUP.FIELD=VALUE`, e.g. `ragsweep retriever=dense retriever.top_k=8`.", "",
           "## The primary config", ""]
    out += _render_option(read_option(conf / "config.yaml", ""), "`config.yaml`", False)[2:]
    # another command's primary config beside config.yaml (conf/questions.yaml: ragsweep-questions)
    for f in sorted(p for p in conf.glob("*.yaml") if p.name != "config.yaml"):
        out += [f"## The primary config of `ragsweep-{f.stem}`", ""]
        out += _render_option(read_option(f, ""), f"`{f.name}`", False)
    for g in order:
        out += [f"## {g}", ""]
        names = ", ".join(f"`{f.stem}`" for f in groups[g])
        out += [f"Options: {names}." + (f" Default: `{defaults[g]}`." if g in defaults else ""), ""]
        for f in groups[g]:
            heading = f"`+experiment={f.stem}`" if g == "experiment" else f"`{g}={f.stem}`"
            out += _render_option(read_option(f, g), heading, defaults.get(g) == f.stem)
    return "\n".join(out).rstrip() + "\n"


# ---- the measured results in the site -------------------------------------------------------------
def result_files(root: Path = ROOT) -> list[str]:
    """Repository paths of the pages and files under experiments/ that join the site."""
    md = [p for p in (root / RESULTS_MD).rglob("*.md")]
    assets = [p for d in RESULTS_ASSETS for p in (root / d).rglob("*") if p.suffix in ASSET_SUFFIXES]
    return sorted({p.relative_to(root).as_posix() for p in md + assets if p.is_file()})


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip().replace("`", "")
    return path.stem


def results_index(root: Path, files: list[str]) -> str:
    out = ["# Measured results", "",
           "Every benchmark, reproduction and meta-evaluation writes its numbers to a page under",
           "`experiments/` in the repository, with the command that made them and the machine it ran on.",
           "They are listed here as they lie there.", ""]
    folder = None
    for f in (f for f in files if f.endswith(".md")):
        d = posixpath.dirname(f)
        if d != folder:
            out += ["", f"## `{d}/`", ""]
            folder = d
        out.append(f"- [{_title(root / f)}]({f})")
    return "\n".join(out) + "\n"


LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)(#[^)\s]*)?(\s+\"[^\"]*\")?\)")


def rewrite_links(markdown: str, page_repo_path: str, page_site_path: str, included: set[str],
                  docs: str = "docs") -> str:
    """Point each relative link of a page, written as the repository lays the files out, at the
    same file in the site: an included file keeps its path, a docs page loses the ``docs/``."""
    here = posixpath.dirname(page_repo_path)

    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return m.group(0)
        repo = posixpath.normpath(posixpath.join(here, target))
        if repo in included:
            site = repo
        elif repo.startswith(docs + "/"):
            site = repo[len(docs) + 1:]
        else:
            return m.group(0)
        new = posixpath.relpath(site, posixpath.dirname(page_site_path) or ".")
        return f"{m.group(1)}{new}{m.group(3) or ''}{m.group(4) or ''})"

    return LINK.sub(fix, markdown)


# ---- the hooks ---------------------------------------------------------------------------------------
_INCLUDED: set[str] = set()


def on_files(files, config):  # noqa: ANN001
    from mkdocs.structure.files import File

    global _INCLUDED
    included = result_files()
    _INCLUDED = set(included)
    for rel in included:
        files.append(File.generated(config, rel, abs_src_path=str(ROOT / rel)))
    files.append(File.generated(config, "results.md", content=results_index(ROOT, included)))
    files.append(File.generated(config, "reference/config.md", content=config_reference(ROOT / "conf")))
    return files


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001
    src = page.file.src_uri
    docs = Path(config["docs_dir"]).resolve().relative_to(ROOT).as_posix()
    repo = src if src in _INCLUDED else f"{docs}/{src}"
    return rewrite_links(markdown, repo, src, _INCLUDED, docs)
