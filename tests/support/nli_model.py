"""A tiny NLI cross-encoder folder made offline (BERT with 1 layer of 16 units, the bundled MiniLM's
tokenizer), as a user's own model is saved: ``save_pretrained`` of an
``AutoModelForSequenceClassification`` and its tokenizer. Its classifier always picks ``winner``."""

from __future__ import annotations

from pathlib import Path

ID2LABEL = {0: "contradiction", 1: "entailment", 2: "neutral"}


def tiny_nli_model(folder: Path, winner: int = 1, id2label: dict[int, str] | None = None) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from ragsweep.corpus.embeddings import minilm_path

    id2label = id2label or ID2LABEL
    tok = AutoTokenizer.from_pretrained(minilm_path())
    config = BertConfig(
        vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=128, num_labels=len(id2label),
        id2label=id2label, label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # class `winner` wins for every pair
        model.classifier.weight.zero_()
        bias = torch.zeros(len(id2label))
        bias[winner] = 5.0
        model.classifier.bias.copy_(bias)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
