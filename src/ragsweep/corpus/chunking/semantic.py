"""``chunker=semantic``: a new chunk where the meaning of adjacent sentences drifts apart.

Each document is cut into sentences (:func:`ragsweep.corpus.text.sentence_spans`, as ``chunker=sentences``);
every sentence is embedded by the bundled all-MiniLM-L6-v2 (``model``), through the one embedding
cache (:func:`ragsweep.corpus.embeddings.embed_texts`: a sentence already encoded, by this chunker at
another size or by any other stage, is not encoded again). Between sentences i and i+1 the cosine
distance 1 - cos(e_i, e_i+1) is computed; a breakpoint falls where it is above the ``threshold``-th
percentile of that document's distances (the percentile method of Kamradt's semantic chunking,
LlamaIndex's ``SemanticSplitterNodeParser``: 95 gives about one break per 20 sentences, lower
gives more). The sentences between two breakpoints form a chunk; a group over ``size`` tokens is
packed as ``chunker=sentences`` packs a document (``overlap`` in sentences, default 0).

Its speed is bounded by encoding every sentence once with MiniLM (docs/chunking.md has the figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ragsweep.corpus.chunking.base import Chunker, Piece, _whole
from ragsweep.corpus.chunking.sentences import SentencesConfig, pack_sentences
from ragsweep.corpus.chunking.splitter import TokenCount, trim
from ragsweep.corpus.embeddings import embed_texts, load_sentence_transformer, model_key
from ragsweep.corpus.text import sentence_spans
from ragsweep.types import Document


@dataclass
class SemanticConfig(SentencesConfig):
    overlap: int = 0
    #: percentile (0-100) of a document's adjacent-sentence distances above which a chunk ends
    threshold: float = 95.0
    model: str = "minilm"
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps (not part of the cache key)
    batch_size: int = 64  # sentences per encoder call (not part of the cache key)

    def __post_init__(self) -> None:
        super().__post_init__()
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 100:
            raise ValueError(f"chunker.threshold ({t!r}) is a percentile from 0 to 100 (95: a break at the "
                             "5% largest drops in similarity between adjacent sentences)")
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("chunker.model must be 'minilm' or a sentence-transformers model name or path")
        if not (self.device in ("auto", "cpu", "mps") or str(self.device).startswith("cuda")):
            raise ValueError(f"chunker.device ({self.device!r}) must be auto, cpu, cuda, cuda:N or mps")
        if not _whole(self.batch_size) or self.batch_size < 1:
            raise ValueError(f"chunker.batch_size ({self.batch_size!r}) must be a whole number >= 1")


def breakpoints(vectors: np.ndarray, threshold: float) -> list[int]:
    """Indices i such that a chunk ends after sentence i: where the cosine distance to sentence
    i + 1 is above the ``threshold``-th percentile of the distances."""
    if len(vectors) < 2:
        return []
    v = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    dist = 1.0 - np.sum(v[:-1] * v[1:], axis=1)
    cut = float(np.percentile(dist, threshold))
    return [int(i) for i in np.flatnonzero(dist > cut)]


class SemanticChunker(Chunker):
    """Breakpoints where adjacent sentences' MiniLM similarity drops; ``size`` tokens at most."""

    name = "semantic"
    Config = SemanticConfig
    result_neutral = ("device", "batch_size")

    def _encode(self, texts: list[str]) -> Any:
        device = self.config.device
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        model = load_sentence_transformer(self.config.model, device)
        return model.encode(texts, batch_size=self.config.batch_size, convert_to_numpy=True, show_progress_bar=False)

    def spans_batch(self, docs: Sequence[Document], counts: Sequence[TokenCount]) -> list[list[Piece]]:
        sents = [sentence_spans(d.text) if d.text else [] for d in docs]
        texts = [d.text[a:b] for d, ss in zip(docs, sents) for a, b in ss]
        vecs, encoded = embed_texts(texts, model_key(self.config.model), self._encode, self.cache,
                                    desc="sentence embeddings", batch_size=self.config.batch_size)
        self.stats["sentences_encoded"] = self.stats.get("sentences_encoded", 0) + encoded
        return [self._spans(d, ss, c, vecs) for d, ss, c in zip(docs, sents, counts)]

    def spans(self, doc: Document, count: TokenCount) -> list[Piece]:
        return self.spans_batch([doc], [count])[0]

    def _spans(self, doc: Document, sents: list[tuple[int, int]], count: TokenCount,
               vecs: dict[str, np.ndarray]) -> list[Piece]:
        if not sents:
            return []
        text, size = doc.text, self.config.size
        ends = breakpoints(np.stack([vecs[text[a:b]] for a, b in sents]), self.config.threshold)
        out: list[Piece] = []
        lo = 0
        for hi in ends + [len(sents) - 1]:
            group = sents[lo : hi + 1]
            lo = hi + 1
            a, b = group[0][0], group[-1][1]
            if count(a, b) <= size:
                span = trim(text, a, b)
                if span is not None:
                    out.append(span)
            else:
                out.extend(pack_sentences(text, group, count, size, self.config.overlap))
        return out
