"""The torch-only encoder of the bundled MiniLM against sentence-transformers on real passages,
and the tokenizer the chunker reads without transformers against AutoTokenizer's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragsweep.corpus import bert_encoder, chunker
from ragsweep.corpus.embeddings import load_sentence_transformer, minilm_path

CLAPNQ = Path(chunker.__file__).parent / "dataset" / "builtin" / "clapnq" / "clapnq_dev_answerable.jsonl"


def clapnq_texts(n_records: int = 12) -> list[str]:
    """Passages (long: truncated at 256 tokens), questions and single sentences of real ClapNQ records."""
    texts: list[str] = []
    with CLAPNQ.open(encoding="utf-8") as f:
        for line, _ in zip(f, range(n_records)):
            rec = json.loads(line)
            texts.append(rec["input"])
            for p in rec["passages"]:
                texts.append(p["text"])
                texts.extend(s.strip() for s in p["text"].split(" . ")[:3] if s.strip())
    return texts


@pytest.fixture(scope="module")
def sentence_transformer():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_path(), device="cpu")


def test_the_bundled_minilm_loads_without_sentence_transformers():
    model = load_sentence_transformer("minilm", "cpu")
    assert isinstance(model, bert_encoder.BertEncoder)
    assert model.normalize and model.max_seq_length == 256 and model.get_sentence_embedding_dimension() == 384


def test_vectors_equal_sentence_transformers_to_float_rounding(sentence_transformer):
    texts = clapnq_texts() + ["  leading and trailing spaces  ", "x", "word " * 600]
    ours = load_sentence_transformer("minilm", "cpu").encode(texts, batch_size=16)
    theirs = sentence_transformer.encode(texts, batch_size=16, convert_to_numpy=True)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(texts), 384)
    assert np.abs(ours - theirs).max() < 2e-6
    # a single string gives one row, as sentence-transformers returns it
    one = load_sentence_transformer("minilm", "cpu").encode(texts[1])
    assert one.shape == (384,) and np.abs(one - theirs[1]).max() < 2e-6


def test_a_shorter_max_seq_length_truncates_as_sentence_transformers_does(sentence_transformer):
    texts = clapnq_texts(3)
    ours = bert_encoder.BertEncoder(minilm_path(), max_seq_length=32).encode(texts)
    sentence_transformer.max_seq_length = 32
    try:
        theirs = sentence_transformer.encode(texts, convert_to_numpy=True)
    finally:
        sentence_transformer.max_seq_length = 256
    assert np.abs(ours - theirs).max() < 2e-6
    full = bert_encoder.BertEncoder(minilm_path()).encode(texts)
    assert np.abs(ours - full).max() > 1e-2  # the truncation did something


def test_batches_hold_similar_lengths_within_the_token_budget():
    lengths = [3, 250, 12, 12, 40, 256, 7, 90, 12, 1]
    batches = bert_encoder.BertEncoder._batches(lengths, batch_size=3, budget=300)
    flat = [int(i) for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every text once
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)  # longest first
    for b in batches:
        assert 1 <= len(b) <= 3 and (len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 300)
    assert [len(b) for b in batches] == [1, 1, 3, 3, 2]  # 256 and 250 alone; 12 x 3 rows fit 300
    assert bert_encoder.BertEncoder._batches([], batch_size=3) == []


@pytest.mark.parametrize("edit", ["cls_pooling", "no_tokenizer_json", "not_bert", "extra_module"])
def test_any_other_model_is_left_to_sentence_transformers(tmp_path, edit):
    folder = tmp_path / "model"
    shutil.copytree(minilm_path(), folder)
    assert bert_encoder.supported(folder)
    if edit == "cls_pooling":
        cfg = json.loads((folder / "1_Pooling" / "config.json").read_text())
        cfg.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    elif edit == "no_tokenizer_json":
        (folder / "tokenizer.json").unlink()
    elif edit == "not_bert":
        cfg = json.loads((folder / "config.json").read_text())
        cfg["model_type"] = "roberta"
        (folder / "config.json").write_text(json.dumps(cfg))
    else:
        modules = json.loads((folder / "modules.json").read_text())
        modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
        (folder / "modules.json").write_text(json.dumps(modules))
    assert not bert_encoder.supported(folder)
    with pytest.raises(ValueError, match="not a BERT model"):
        bert_encoder.BertEncoder(folder)


def test_the_chunker_reads_minilm_tokens_and_offsets_as_autotokenizer_does():
    docs = [p["text"] for t in [CLAPNQ] for line in t.open(encoding="utf-8") for p in json.loads(line)["passages"]][:300]
    docs += ["Ünïcödé façade — naïve café 東京 😀 tabs\tand\nnewlines", ""]
    chunker._backend.cache_clear()
    ours = chunker._backend("minilm").encode_batch(docs, add_special_tokens=False)
    reference = chunker.load_tokenizer("minilm")(docs, add_special_tokens=False, return_offsets_mapping=True,
                                                 truncation=False)
    assert [e.ids for e in ours] == reference["input_ids"]
    assert [e.offsets for e in ours] == [[tuple(o) for o in offs] for offs in reference["offset_mapping"]]
    assert sum(len(e.ids) for e in ours) > 300 * 100  # long documents: no truncation at 128 or 512
