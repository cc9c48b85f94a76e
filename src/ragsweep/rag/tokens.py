"""Counting prompt tokens the way the serving model does, to fit prompts into its context.

llama.cpp: the GGUF's own vocabulary (loaded with ``vocab_only``, no weights: fast). Other
servers: the model's Hugging Face tokenizer when it loads (offline or from a hub); otherwise a
conservative estimate (one token per 3 characters), which errs on the side of dropping a chunk
rather than overflowing the context.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable

log = logging.getLogger(__name__)


def estimate(text: str) -> int:
    return len(text) // 3 + 1


@functools.lru_cache(maxsize=4)
def gguf_counter(model_path: str) -> Callable[[str], int]:
    import contextlib
    import io

    from llama_cpp import Llama

    chatter = io.StringIO()  # llama.cpp's load messages (e.g. "n_ctx_seq > n_ctx_train") go to the log file
    with contextlib.redirect_stderr(chatter):
        vocab = Llama(model_path=model_path, vocab_only=True, verbose=False)
    if chatter.getvalue().strip():
        log.debug("llama.cpp (vocabulary of %s): %s", model_path, chatter.getvalue().strip())

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    return count


@functools.lru_cache(maxsize=4)
def hf_counter(name: str) -> Callable[[str], int]:
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - no hub, unknown model: fall back, and say so
        log.warning("no tokenizer for %s (%s); estimating prompt tokens as characters/3", name, type(exc).__name__)
        return estimate
    return lambda text: len(tok(text, add_special_tokens=True)["input_ids"])


def counter_for(server: object) -> Callable[[str], int]:
    """The best token counter for a server, chosen by what its config names, not by its kind.

    A server whose config names a model file (``generator.server.model_path``: a ``.gguf``, or
    a short name its resolver knows, e.g. ``smollm2``) is counted with that file's vocabulary;
    one that names Hugging Face weights it serves itself (``generator.server.model``) with
    that model's tokenizer; any other (an external endpoint: only a remote model name) is
    estimated.
    """
    model_path = getattr(server, "resolved_model_path", None) or getattr(server, "model_path", None)
    if model_path:
        try:
            from ragsweep.rag.generator.server import resolve_model_path

            return gguf_counter(str(resolve_model_path(str(model_path))))
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot load the GGUF vocabulary (%s); estimating prompt tokens", exc)
            return estimate
    model = getattr(server, "model", None)
    if isinstance(model, str) and model:
        return hf_counter(model)
    return estimate
