"""Built-in long-document datasets, on which chunk size, overlap and top-k change the system.

Both are built, deterministically and offline, from the data already shipped in the package (no
second copy): see each class for the shape (measured with the MiniLM tokenizer the chunker
uses; ``python -m ragsweep.analysis.degenerate +experiment=...`` prints the per-point figures).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ragsweep.corpus.dataset.loaders import BUILTIN, ClapNQ, _BuiltinConfig, _Loader, finish, read_json
from ragsweep.corpus.dataset.queries import read_queries
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document, Query, Span

#: an overlap between consecutive pre-cut chunks shorter than this, or not starting at a word
#: boundary, is a coincidence ("respon|se" + "se|ntence"), not a repeated piece of text
MIN_OVERLAP = 3
_TOP_HEADING = re.compile(r"(?m)^([1-9]) [A-Z][^\n]*$")


def reassemble(chunks: list[str]) -> tuple[str, list[int]]:
    """The text a list of consecutive, overlapping chunks was cut from, and each chunk's start.

    Consecutive chunks share a repeated piece (the end of one is the start of the next) or, at a
    paragraph boundary, nothing; then they are joined by a blank line."""
    if not chunks:
        return "", []
    text, starts = chunks[0], [0]
    for c in chunks[1:]:
        ov = 0
        for n in range(min(len(text), len(c)), MIN_OVERLAP - 1, -1):
            if text.endswith(c[:n]) and (n == len(text) or not text[-n - 1].isalnum()):
                ov = n
                break
        if ov:
            starts.append(len(text) - ov)
            text += c[ov:]
        else:
            text += "\n\n"
            starts.append(len(text))
            text += c
    return text, starts


@dataclass
class _OwnQuestionsConfig(_BuiltinConfig):
    """A built-in corpus with the user's questions instead of its own: ``queries``, a questions file
    (:mod:`ragsweep.corpus.dataset.queries`; e.g. a set ``ragsweep-questions`` generated from it)."""

    queries: str | None = None
    match: float = 0.8

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.match <= 1:
            raise ValueError(f"dataset.match ({self.match}) must be in (0, 1]: e.g. 0.8")


def _finish(loader: _Loader, documents: list[Document], queries: list[Query], source: str) -> Dataset:
    """``finish`` with the built-in questions, or those of ``dataset.queries`` where it is set."""
    cfg = loader.config
    if not cfg.queries:
        return finish(cfg.name, documents, queries, cfg.limit, source)
    own, info = read_queries(cfg.queries, documents, cfg.match)
    ds = finish(cfg.name, documents, own, cfg.limit, source)
    ds.stats.update(info["stats"])
    ds.synthetic = info["synthetic"]
    return ds


def _split_spans(start: int, end: int, bounds: list[tuple[str, int, int]]) -> list[Span]:
    """A span of the full text as spans of the documents it falls in (trimmed of whitespace)."""
    out = []
    for doc_id, a, b in bounds:
        lo, hi = max(start, a), min(end, b)
        if lo < hi:
            out.append(Span(doc_id, lo - a, hi - a))
    return out


class RagbenchPaperLongDoc(_Loader):
    """The RAGBench paper (Friel et al. 2024) as long documents: its 197 overlapping ~50-word
    chunks (``ragbench_paper_qa``) reassembled into the paper's text (67,830 characters) and cut
    at its top-level section headings (``split: sections``, the default: 8 documents - front
    matter with the abstract, sections 1-6 (6 with the references), appendix - of 272 to 5,727
    MiniLM tokens, median 972, 17,391 in all) or kept whole (``split: none``: one document of
    17,391 tokens). At 300-token chunks that is about 70 chunks, at 600 about 35.

    400 questions; each question's relevant chunk becomes the character span of that chunk in
    the reassembled text (split where it crosses a section boundary). No reference answers: only
    the retrieval metrics and the reference-free TRACe / RAGChecker metrics apply.
    """

    @dataclass
    class Config(_OwnQuestionsConfig):
        name: str = "ragbench_paper_longdoc"
        split: str = "sections"

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.split not in ("sections", "none"):
                raise ValueError(f"dataset.split ({self.split!r}) must be 'sections' or 'none'")

    def load(self) -> Dataset:
        path = Path(str(BUILTIN / "ragbench_paper_qa" / "ragbench_paper_qa.json"))
        data = read_json(path)
        ids = [str(k) for k in data["corpus"]]
        full, starts = reassemble([str(v) for v in data["corpus"].values()])
        where = {cid: (s, s + len(data["corpus"][cid])) for cid, s in zip(ids, starts)}
        cuts = [0]
        if self.config.split == "sections":
            last: dict[str, int] = {}
            for m in _TOP_HEADING.finditer(full):  # the table of contents comes first: keep the last
                last[m.group(1)] = m.start()
            cuts += sorted(last.values())
        cuts.append(len(full))
        bounds: list[tuple[str, int, int]] = []
        documents: list[Document] = []
        for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
            if b <= a:
                continue
            title = "front matter" if i == 0 and self.config.split == "sections" else full[a:].split("\n", 1)[0]
            doc_id = f"ragbench_paper/{i}" if self.config.split == "sections" else "ragbench_paper"
            documents.append(Document(doc_id, full[a:b], title))
            bounds.append((doc_id, a, b))
        queries = []
        for qid, text in data["questions"].items():
            spans: list[Span] = []
            for cid in data["relevant_contexts"].get(qid, []):
                if str(cid) not in where:
                    raise DataError(f"{path} question {qid}: relevant chunk '{cid}' is not in the corpus")
                spans += _split_spans(*where[str(cid)], bounds)
            queries.append(Query(str(qid), text, None, tuple(spans)))
        return _finish(self, documents, queries, str(path))


class ClapNQLongDoc(_Loader):
    """ClapNQ dev with its 600 passages (300 gold, 300 distractors from the unanswerable
    questions' articles) grouped into long documents: passages sorted by Wikipedia title (the
    passages of one article stay together), then every ``passages_per_doc`` consecutive ones
    joined by a blank line into one document (default 10: 60 documents of 1,585 to 6,980 MiniLM
    tokens, median 2,072; 130,513 tokens in all, against a median of 187 per passage in
    ``clapnq``, where 88.5% of the documents fit in one 300-token chunk and none here does).

    The same 300 questions, human reference answers and annotator-selected sentences as
    ``clapnq`` (its spans shifted into the documents), so every metric applies, RAGChecker's
    included. The documents are synthetic (neighbouring articles, not one article), so a chunk
    can cross from one passage into the next, as in a long article; the paper's own corpus
    (the full Wikipedia documents) is ``dataset=ragchecker_benchmark``.
    """

    @dataclass
    class Config(_OwnQuestionsConfig):
        name: str = "clapnq_longdoc"
        passages_per_doc: int = 10

        def __post_init__(self) -> None:
            super().__post_init__()
            n = self.passages_per_doc
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"dataset.passages_per_doc ({n}) must be a whole number >= 1")

    def load(self) -> Dataset:
        base = ClapNQ().load()
        passages = sorted(base.documents, key=lambda d: ((d.title or "").lower(), d.doc_id))
        n = self.config.passages_per_doc
        documents: list[Document] = []
        moved: dict[str, tuple[str, int]] = {}  # passage id -> (document id, offset)
        for g in range(0, len(passages), n):
            group = passages[g : g + n]
            doc_id = f"clapnq_doc/{g // n}"
            parts, pos = [], 0
            for p in group:
                moved[p.doc_id] = (doc_id, pos)
                parts.append(p.text)
                pos += len(p.text) + 2
            titles = list(dict.fromkeys(p.title for p in group if p.title))
            documents.append(Document(doc_id, "\n\n".join(parts), "; ".join(titles) or None))
        queries = []
        for q in base.queries:
            spans = tuple(Span(moved[s.doc_id][0], moved[s.doc_id][1] + s.start, moved[s.doc_id][1] + s.end) for s in q.relevant)
            queries.append(Query(q.query_id, q.query, q.gt_answer, spans))
        return _finish(self, documents, queries, "clapnq_longdoc")
