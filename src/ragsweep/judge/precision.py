"""The trained checker's arithmetic: which precision ``auto`` means on this machine, and int8.

``auto`` is bfloat16 on a GPU and on a CPU that computes bf16 products natively, fp32 elsewhere;
``int8`` quantizes the transformer layers' dense maps (torch's dynamic quantization) and is asked
for by name only (``experiments/meta_eval/checker_model_card.md``, "int8 against fp32").
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ragsweep.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "int8")
#: /proc/cpuinfo flags of CPUs that compute bfloat16 products natively (AVX512-BF16: AMD Zen 4+,
#: Intel Cooper Lake+; AMX: Intel Sapphire Rapids+); elsewhere bf16 is emulated and slower than fp32
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def resolve_precision(precision: str, device: str, flags: set[str] | None = None) -> str:
    """``auto`` -> ``bf16`` on a GPU or a CPU with native bf16 arithmetic, else ``fp32``. ``int8`` is
    asked for by name only: 2x fp32's speed and the allowed parts' AUROCs within 0.007 of fp32's, but
    about a tenth of the labels unlike fp32's at the threshold (``experiments/meta_eval/checker_model_card.md``)."""
    if precision != "auto":
        return precision
    if not device.startswith("cpu"):
        return "bf16"
    if flags is None:
        flags = _cpu_flags()
    return "bf16" if any(f in flags for f in BF16_FLAGS) else "fp32"


@lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    """This CPU's flags, read once per process (``precision`` is resolved for every batch scored)."""
    from ragsweep.rag.generator.servers.cpu_backend import cpu_flags

    return frozenset(cpu_flags())


def quantize_int8(model: Any) -> Any:
    """The transformer layers' dense maps of ``model`` (a :func:`build_model` module, CPU, eval) in
    int8: weights quantized per output channel once, activations per batch (torch's dynamic
    quantization, fbgemm: VNNI where the CPU has it, AVX2 otherwise); embeddings, attention, layer
    norms and the head stay fp32. Returns the model, its ``linear`` set."""
    import warnings

    import torch
    import torch.nn.functional as F

    try:
        from torch.ao.nn.quantized.dynamic import Linear as QLinear
    except ImportError as exc:  # a torch without its dynamic quantization
        raise ConfigError(f"evaluator.checker.precision: int8 needs torch's dynamic quantization ({exc}); "
                          "use precision=fp32 or bf16") from None
    packed: dict[int, Any] = {}
    with warnings.catch_warnings():  # torch 2.13 marks quantized tensors deprecated; the pinned torch has them
        warnings.simplefilter("ignore")
        weights = model.weights()
        for name, w in weights.items():
            if name.startswith("encoder.layer.") and name.endswith(("dense.weight", "query.weight", "key.weight",
                                                                    "value.weight")):
                bias = weights[name[: -len("weight")] + "bias"]
                dense = torch.nn.Linear(w.shape[1], w.shape[0])
                dense.weight.data, dense.bias.data = w.detach().float(), bias.detach().float()
                dense.qconfig = torch.ao.quantization.per_channel_dynamic_qconfig  # type: ignore[assignment]
                packed[id(w)] = QLinear.from_float(dense)

    def linear(x: Any, weight: Any, bias: Any) -> Any:  # the same Parameter objects every forward
        q = packed.get(id(weight))
        return q(x) if q is not None else F.linear(x, weight, bias)

    model.linear = linear
    return model
