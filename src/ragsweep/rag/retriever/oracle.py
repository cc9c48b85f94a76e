"""The oracle retriever: the chunks that overlap the question's relevant spans, best first.

``retriever=oracle`` is the ceiling of every retriever-side metric for the run's chunking (the
"oracle" rows of BERGEN and FlashRAG): for each question it returns the chunks that share
characters with one of its labelled relevant spans (``Query.relevant``), ranked by the number of
characters they share (ties: chunk order), at most ``k``. A question with fewer overlapping chunks
gets fewer hits (never padded with irrelevant ones); a question without relevance labels gets none
(counted in ``oracle/no_labels`` on the retriever's ``stats`` and logged once).

It reads the labels, so it is a bound, never a system: the report shows it beside the others as the
ceiling (:mod:`ragsweep.analysis.report.bounds`). It needs a dataset with relevant spans
(``dataset.has_relevance``); on one without, every question gets no hit and the run says so.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from ragsweep.rag.retriever.base import Retriever, RetrieverConfig, chunks_fingerprint
from ragsweep.types import Chunk, Hit, Query

log = logging.getLogger(__name__)


@dataclass
class OracleConfig(RetrieverConfig):
    pass


class OracleRetriever(Retriever):
    """Chunks overlapping the relevant spans, ranked by characters of overlap; see the module doc."""

    name = "oracle"
    Config = OracleConfig

    def index(self, chunks: Sequence[Chunk], cache: Any = None, progress: Any = None) -> None:
        # a chunk file (ChunkTable) stays on disk: search reads only the labelled documents' chunks
        self._lazy = hasattr(chunks, "of_docs")
        self.chunks = chunks if self._lazy else list(chunks)
        self.fingerprint = getattr(chunks, "fingerprint", None) or chunks_fingerprint(self.chunks)
        self._by_doc: dict[str, list[int]] = defaultdict(list)
        self._read: set[str] = set()
        if not self._lazy:
            for i, c in enumerate(self.chunks):
                self._by_doc[c.doc_id].append(i)
        self.stats["no_labels"] = 0

    def search(self, queries: Sequence[Query], k: int | None = None, cache: Any = None) -> dict[str, list[Hit]]:
        if self.fingerprint is None:
            raise RuntimeError("OracleRetriever.search called before index(chunks)")
        k = self.top_k if k is None else int(k)
        if k < 1:
            raise ValueError(f"retriever.search k ({k}) must be >= 1")
        if self._lazy:
            wanted = {s.doc_id for q in queries for s in q.relevant} - self._read
            for i, c in self.chunks.of_docs(wanted):  # type: ignore[attr-defined]
                self._by_doc[c.doc_id].append(i)
            self._read |= wanted
        out: dict[str, list[Hit]] = {}
        unlabelled = 0
        for q in queries:
            if not q.relevant:
                unlabelled += 1
                out[q.query_id] = []
                continue
            overlap: dict[int, int] = defaultdict(int)
            for span in q.relevant:
                for i in self._by_doc.get(span.doc_id, ()):
                    c = self.chunks[i]
                    n = min(c.end, span.end) - max(c.start, span.start)
                    if n > 0:
                        overlap[i] += n
            ranked = sorted(overlap.items(), key=lambda item: (-item[1], item[0]))[:k]
            out[q.query_id] = [Hit(chunk=self.chunks[i], score=float(n), rank=r + 1) for r, (i, n) in enumerate(ranked)]
        self.stats["queries_computed"] += len(queries)
        if unlabelled:
            self.stats["no_labels"] += unlabelled
            log.warning("retriever=oracle: %d of %d questions have no relevant spans and get no chunk "
                        "(the oracle needs a dataset with relevance labels)", unlabelled, len(queries))
        return out


__all__ = ["OracleRetriever"]
