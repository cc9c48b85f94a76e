"""A sentence-transformers BERT model with mean pooling (all-MiniLM-L6-v2 and its kind), encoded
with torch and the Rust tokenizer alone.

Why not ``SentenceTransformer``: loading a model through it imports sentence-transformers,
scikit-learn and transformers, which costs more CPU time than the judge's whole encoding of a
20-question run (measured in ``experiments/results/bench_default_run.md``); this path imports
torch, ``tokenizers`` and ``safetensors`` only. It is used for a local model folder whose
``modules.json`` is exactly Transformer -> Pooling (mean) [-> Normalize] over a ``bert`` config
with absolute positions and a ``tokenizer.json`` (:func:`supported`); every other model goes to
``SentenceTransformer``. The vectors agree with ``SentenceTransformer.encode`` to float rounding
(``tests/unit/corpus/test_bert_encoder.py`` compares them on real passages).

The forward pass is BERT's (Devlin et al. 2019) in inference mode, written with torch's own
layers: embeddings (word + position + token type 0) and LayerNorm; per layer, self-attention
(``scaled_dot_product_attention`` with the padding masked), output projection, residual and
LayerNorm, then the GELU feed-forward, residual and LayerNorm; mean of the last hidden states over
the real tokens, then L2 normalisation when the model has a Normalize module. As
sentence-transformers does, texts are stripped and truncated to ``max_seq_length`` tokens including
[CLS] and [SEP]; batches are formed by number of tokens, at most :data:`BATCH_TOKENS` padded tokens
each (sentence-transformers: ``batch_size`` texts sorted by characters), so little of a batch is
padding. A text's vector does not depend on its batch beyond float rounding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
#: padded tokens a batch holds at most: sorted by tokens, batches of ~2,000 tokens encoded the
#: judge's texts of a default run 2.2x faster than batches of 64 texts sorted by characters, as
#: sentence-transformers forms them (2.3 s against 5.0-5.9 s, 2 cores; larger batches are slower:
#: their activations leave the CPU's caches); experiments/results/cpu_speed.md
BATCH_TOKENS = 2048


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def supported(path: str | Path) -> bool:
    """Whether the folder ``path`` holds a model this encoder reproduces (see the module doc)."""
    p = Path(path)
    try:
        modules = _read(p / "modules.json")
        kinds = [m["type"] for m in sorted(modules, key=lambda m: m["idx"])]
        if kinds not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0].get("path", "") != "":
            return False
        pooling_dir = next(m["path"] for m in modules if m["type"] == _POOLING)
        pooling = _read(p / pooling_dir / "config.json")
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True]
        config = _read(p / "config.json")
        st_config = _read(p / "sentence_bert_config.json")
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return False
    return (modes == ["pooling_mode_mean_tokens"] and config.get("model_type") == "bert"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and config.get("hidden_act") == "gelu" and not st_config.get("do_lower_case", False)
            and (p / "tokenizer.json").is_file() and (p / "model.safetensors").is_file())


class BertEncoder:
    """``encode(texts)`` as ``SentenceTransformer.encode`` returns it (float32 numpy rows)."""

    def __init__(self, path: str | Path, device: str = "cpu", max_seq_length: int | None = None):
        import tokenizers
        import torch
        from safetensors.torch import load_file

        p = Path(path)
        if not supported(p):
            raise ValueError(f"{p}: not a BERT model with mean pooling that BertEncoder reproduces")
        config = _read(p / "config.json")
        modules = _read(p / "modules.json")
        self.normalize = any(m["type"] == _NORMALIZE for m in modules)
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.max_positions = int(config["max_position_embeddings"])
        self.device = torch.device(device)
        self._max_seq_length = int(max_seq_length or _read(p / "sentence_bert_config.json").get("max_seq_length") or self.max_positions)
        weights = load_file(str(p / "model.safetensors"), device=str(self.device))
        self.w = {k.removeprefix("bert."): v for k, v in weights.items()}
        self.tokenizer = tokenizers.Tokenizer.from_file(str(p / "tokenizer.json"))
        self.tokenizer.no_padding()
        self._truncate()

    @property
    def max_seq_length(self) -> int:
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self._max_seq_length = int(value)
        self._truncate()

    def _truncate(self) -> None:
        self.tokenizer.enable_truncation(min(self._max_seq_length, self.max_positions))

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.w["embeddings.word_embeddings.weight"].shape[1])

    def _forward(self, ids: Any, mask: Any) -> Any:
        import torch
        import torch.nn.functional as F

        x = bert_layers(self.w, ids, mask, heads=self.heads, layers=self.layers, eps=self.eps)
        m = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * m).sum(dim=1) / torch.clamp(m.sum(dim=1), min=1e-9)
        return F.normalize(pooled, p=2, dim=-1) if self.normalize else pooled

    @staticmethod
    def _batches(lengths: Sequence[int], batch_size: int, budget: int = BATCH_TOKENS) -> list[np.ndarray]:
        """Indices of the texts by batch: longest first, at most ``batch_size`` texts and (beyond
        one text) ``budget`` padded tokens a batch."""
        order = np.argsort([-n for n in lengths], kind="stable")
        out: list[np.ndarray] = []
        start = 0
        while start < len(order):
            width = max(lengths[order[start]], 1)  # the batch's longest text: every row is padded to it
            take = max(1, min(batch_size, budget // width))
            out.append(order[start : start + take])
            start += take
        return out

    def encode(self, sentences: str | Sequence[str], batch_size: int = 32, convert_to_numpy: bool = True,
               show_progress_bar: bool = False, normalize_embeddings: bool = False, **_: Any) -> np.ndarray:
        """Float32 rows in the order of ``sentences`` (one row for a single string)."""
        import torch

        single = isinstance(sentences, str)
        texts = [sentences] if single else [str(s) for s in sentences]
        dim = self.get_sentence_embedding_dimension()
        out = np.zeros((len(texts), dim), dtype=np.float32)
        encoded = self.tokenizer.encode_batch([t.strip() for t in texts]) if texts else []
        with torch.inference_mode():
            budget = BATCH_TOKENS if self.device.type == "cpu" else 1 << 62  # a GPU wants big batches
            for idx in self._batches([len(e.ids) for e in encoded], batch_size, budget):
                encs = [encoded[i] for i in idx]
                length = max(len(e.ids) for e in encs)
                ids = np.zeros((len(encs), length), dtype=np.int64)
                mask = np.zeros((len(encs), length), dtype=np.int64)
                for row, e in enumerate(encs):
                    ids[row, : len(e.ids)] = e.ids
                    mask[row, : len(e.ids)] = 1
                vec = self._forward(torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device))
                if normalize_embeddings and not self.normalize:
                    vec = torch.nn.functional.normalize(vec, p=2, dim=-1)
                out[idx] = vec.float().cpu().numpy()
        return out[0] if single else out


def bert_layers(w: Any, ids: Any, mask: Any, *, heads: int, layers: int, eps: float, type_ids: Any = None,
                dropout: float = 0.0, linear: Any = None) -> Any:
    """BERT's last hidden states (batch x length x dim) from the weights ``w`` (names without the
    ``bert.`` prefix; a dict or a ``ParameterDict`` of tensors): embeddings (word + position +
    token type, type 0 unless ``type_ids`` is given), then ``layers`` transformer layers; padding
    (``mask`` 0) is never attended to. ``dropout`` > 0 applies BERT's hidden and attention dropout
    (training; the cross-encoder of :mod:`ragsweep.judge.trained` uses it), 0 is inference.
    ``linear(x, weight, bias)`` replaces ``F.linear`` for the layers' dense maps (int8 inference)."""
    import torch
    import torch.nn.functional as F

    lin = linear or F.linear

    n, length = ids.shape
    dim = int(w["embeddings.word_embeddings.weight"].shape[1])
    types = w["embeddings.token_type_embeddings.weight"]
    x = (F.embedding(ids, w["embeddings.word_embeddings.weight"])
         + w["embeddings.position_embeddings.weight"][:length]
         + (types[0] if type_ids is None else F.embedding(type_ids, types)))
    x = F.layer_norm(x, (dim,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    train = dropout > 0
    x = F.dropout(x, dropout, train)
    keep = mask.bool()[:, None, None, :]  # attend to real tokens only
    head_dim = dim // heads
    for i in range(layers):
        def g(name: str) -> torch.Tensor:
            return w[f"encoder.layer.{i}.{name}"]

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, heads, head_dim).transpose(1, 2)

        q = split(lin(x, g("attention.self.query.weight"), g("attention.self.query.bias")))
        k = split(lin(x, g("attention.self.key.weight"), g("attention.self.key.bias")))
        v = split(lin(x, g("attention.self.value.weight"), g("attention.self.value.bias")))
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout if train else 0.0)
        ctx = ctx.transpose(1, 2).reshape(n, length, dim)
        out = F.dropout(lin(ctx, g("attention.output.dense.weight"), g("attention.output.dense.bias")), dropout, train)
        x = F.layer_norm(out + x, (dim,), g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias"), eps)
        h = F.gelu(lin(x, g("intermediate.dense.weight"), g("intermediate.dense.bias")))
        out = F.dropout(lin(h, g("output.dense.weight"), g("output.dense.bias")), dropout, train)
        x = F.layer_norm(out + x, (dim,), g("output.LayerNorm.weight"), g("output.LayerNorm.bias"), eps)
    return x
