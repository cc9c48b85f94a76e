from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import CONF
from ragsweep.store.cache import Cache
from ragsweep.corpus.chunker import TokenChunker
from ragsweep.types import Document, Span, is_relevant


LOREM = (
    "The Amazon rainforest covers much of the Amazon basin of South America. "
    "Naïve café owners in São Paulo serve pão de queijo — délicieux! "
    "日本語のテキストも含まれています。 Emoji 🎉🚀 and ﬁ ligatures, İstanbul, ß, ǅ, Ⅻ. "
)


def long_text(n_sentences: int = 40) -> str:
    return " ".join(f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(n_sentences))


def check_chunks(doc: Document, chunks) -> None:
    for i, c in enumerate(chunks):
        assert c.chunk_id == f"{doc.doc_id}#{i}"
        assert c.doc_id == doc.doc_id
        assert 0 <= c.start < c.end <= len(doc.text)
        assert c.text == doc.text[c.start : c.end]


def test_offsets_map_back_exactly_unicode():
    doc = Document("d1", LOREM * 5)
    chunker = TokenChunker(size=20, overlap=5)
    chunks = chunker.chunk([doc])
    assert len(chunks) > 3
    check_chunks(doc, chunks)
    assert chunks[0].start == 0
    assert chunks[-1].end == len(doc.text.rstrip())


def test_windows_size_and_overlap_in_tokens():
    doc = Document("d", long_text(30))
    chunker = TokenChunker(size=25, overlap=0.2)  # 5 tokens shared
    assert chunker.overlap_tokens == 5 and chunker.stride == 20
    offsets = [o for o in chunker.token_offsets([doc.text])[0] if o[1] > o[0]]
    chunks = chunker.chunk([doc])
    starts = [o[0] for o in offsets]
    ends = [o[1] for o in offsets]
    for i, c in enumerate(chunks):
        first, last = starts.index(c.start), ends.index(c.end)
        assert first == 20 * i
        assert last - first + 1 == 25 or c is chunks[-1]
    # consecutive chunks share exactly 5 tokens
    a, b = chunks[0], chunks[1]
    shared = [o for o in offsets if o[0] >= b.start and o[1] <= a.end]
    assert len(shared) == 5
    assert chunks[-1].end == ends[-1]


def test_overlap_fraction_vs_tokens():
    assert TokenChunker(size=300, overlap=0.2).overlap_tokens == 60  # RAGChecker setting
    assert TokenChunker(size=300, overlap=60).overlap_tokens == 60
    assert TokenChunker(size=300, overlap=60.0).overlap_tokens == 60
    assert TokenChunker(size=300, overlap=0).overlap_tokens == 0
    assert TokenChunker(size=300, overlap=1).overlap_tokens == 1  # >= 1 means tokens
    doc = Document("d", long_text(40))
    frac = TokenChunker(size=50, overlap=0.2).chunk([doc])
    toks = TokenChunker(size=50, overlap=10).chunk([doc])
    assert frac == toks


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(size=100, overlap=100), "chunker.overlap"),
        (dict(size=100, overlap=150), "chunker.overlap"),
        (dict(size=10, overlap=0.99), "chunker.overlap"),  # 0.99*10 rounds to 10 tokens
        (dict(size=100, overlap=1.5), "chunker.overlap"),
        (dict(size=100, overlap=-1), "chunker.overlap"),
        (dict(size=0), "chunker.size"),
        (dict(sise=100), "chunker.sise"),
    ],
)
def test_bad_config_raises_naming_field(kwargs, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        TokenChunker(**kwargs)


def test_overlap_error_message_says_fix():
    with pytest.raises(ValueError) as exc:
        TokenChunker(size=100, overlap=100)
    assert str(exc.value) == (
        "chunker.overlap (100) must be smaller than chunker.size (100): lower the overlap or raise the size"
    )


def test_short_empty_and_whitespace_documents():
    chunker = TokenChunker(size=300, overlap=0.2)
    docs = [Document("short", "  A short document.  "), Document("empty", ""), Document("ws", " \n\t ")]
    chunks = chunker.chunk(docs)
    assert [c.chunk_id for c in chunks] == ["short#0"]
    assert chunks[0].text == "A short document."
    check_chunks(docs[0], chunks)


def test_span_relevance_survives_rechunking():
    text = long_text(60)
    needle = "The boiling point of mercury is 356.7 degrees Celsius."
    pos = len(text) // 2
    text = text[:pos] + " " + needle + " " + text[pos:]
    start = text.index(needle)
    span = Span("doc", start, start + len(needle))
    doc = Document("doc", text)
    for size in (50, 200):
        chunks = TokenChunker(size=size, overlap=0.2).chunk([doc])
        check_chunks(doc, chunks)
        relevant = [c for c in chunks if is_relevant(c, [span])]
        assert relevant, size
        assert len(relevant) < len(chunks) or size == 200
        # together the relevant chunks contain the whole span
        assert min(c.start for c in relevant) <= span.start and max(c.end for c in relevant) >= span.end
        assert any("mercury" in c.text for c in relevant)


def test_chunks_are_cached(tmp_path):
    cache = Cache(tmp_path)
    docs = [Document("a", LOREM), Document("b", long_text(10))]
    first = TokenChunker(size=30, overlap=5).chunk(docs, cache=cache)
    assert cache.stats["chunks/misses"] == 1
    second = TokenChunker(size=30, overlap=5).chunk(docs, cache=cache)
    assert cache.stats["chunks/hits"] == 1
    assert first == second
    # a different config or different text is a different entry
    TokenChunker(size=31, overlap=5).chunk(docs, cache=cache)
    TokenChunker(size=30, overlap=5).chunk([Document("a", LOREM + "!"), docs[1]], cache=cache)
    assert cache.stats["chunks/misses"] == 3
    assert TokenChunker(size=30, overlap=5).chunk(docs, cache=None) == first


def test_yaml_instantiates_defaults():
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(CONF / "chunker" / "tokens.yaml")
    chunker = instantiate(cfg)
    assert isinstance(chunker, TokenChunker)
    assert (chunker.size, chunker.overlap_tokens, chunker.config.tokenizer) == (300, 60, "minilm")
    # the Config dataclass works as a Hydra structured-config schema
    merged = OmegaConf.merge(OmegaConf.structured(TokenChunker.Config), {k: v for k, v in cfg.items() if k != "_target_"})
    assert OmegaConf.to_object(merged) == chunker.config



@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300), st.integers(min_value=1, max_value=9), st.integers(min_value=0, max_value=8))
def test_any_unicode_text(text, size, overlap):
    if overlap >= size:
        overlap = size - 1
    chunker = TokenChunker(size=size, overlap=overlap)
    doc = Document("h", text)
    chunks = chunker.chunk([doc])
    check_chunks(doc, chunks)
    offsets = [o for o in chunker.token_offsets([text])[0] if o[1] > o[0]] if text.strip() else []
    if not offsets:
        assert chunks == []
        return
    # every token lies inside some chunk; windows start every `stride` tokens
    for a, b in offsets:
        assert any(c.start <= a and b <= c.end for c in chunks)
    assert len(chunks) == len(chunker.windows(offsets))
    assert chunks[0].start == min(a for a, _ in offsets)
    assert chunks[-1].end == max(b for _, b in offsets)


def test_the_tokenizer_batch_runs_in_parallel_even_where_the_cli_turned_it_off(monkeypatch):
    # the CLI sets TOKENIZERS_PARALLELISM=false; the batched call turns it on for itself only
    import os

    from ragsweep.corpus import chunker as mod

    seen = []
    real = mod._backend("minilm")

    class Spy:
        def encode_batch(self, texts, **kw):
            seen.append(os.environ.get("TOKENIZERS_PARALLELISM"))
            return real.encode_batch(texts, **kw)

    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setattr(mod, "_backend", lambda name: Spy())
    chunks = TokenChunker(size=32, overlap=0).chunk([Document("d", LOREM * 5)])
    assert chunks and seen == ["true"]
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"  # put back: a later fork stays safe
    monkeypatch.delenv("TOKENIZERS_PARALLELISM")
    TokenChunker(size=32, overlap=0).chunk([Document("e", LOREM * 5)])
    assert seen == ["true", "true"] and "TOKENIZERS_PARALLELISM" not in os.environ
