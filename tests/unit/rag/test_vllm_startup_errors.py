"""The first root-cause error of a failed vLLM start, found in its whole log, and the fix that
applies (issue 35, item 3). The lines are vLLM 0.32's messages as its processes log them."""

from __future__ import annotations

import pytest

from ragsweep.rag.generator.servers import vllm_errors

CORE = "(EngineCore pid=4243) ERROR 11-26 12:00:01 [core.py:1108] "
API_TAIL = [f"(APIServer pid=4242)   File \"/venv/lib/python3.12/site-packages/vllm/x.py\", line {n}, in f" for n in range(40)] + [
    "(APIServer pid=4242) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]


def log_with(tmp_path, *lines: str):
    path = tmp_path / "vllm.log"
    path.write_text("\n".join(["# python -m vllm.entrypoints.cli.main serve m", "INFO 11-26 12:00:00 [api_server.py:1] vLLM API server version 0.32.0",
                               f"{CORE}EngineCore failed to start.", f"{CORE}Traceback (most recent call last):",
                               *lines, *API_TAIL]) + "\n")
    return path


@pytest.mark.parametrize("error, fix", [
    ("ValueError: Free memory on device cuda:0 (20.13/79.19 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "the GPU has 20.13 of 79.19 GiB free, less than vLLM's share of it: free the GPU (what holds it is listed below), "
     "or lower evaluator.judge.server.gpu_memory_utilization to at most 0.23"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name).",
     "the model's weights fill vLLM's whole share of the GPU: raise evaluator.judge.server.gpu_memory_utilization"),
    ("ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (5.52 GiB). Based on the available memory, the estimated "
     "maximum model length is 45200. Try increasing `gpu_memory_utilization`",
     "set evaluator.judge.server.max_model_len=45200 or lower"),
    ("ValueError: User-specified max_model_len (65536) is greater than the derived max_model_len "
     "(max_position_embeddings=32768 or model_max_length=None in model's config.json).",
     "the model supports 32768 tokens: set evaluator.judge.server.max_model_len=32768 or lower"),
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5.", "set evaluator.judge.server.dtype=half"),
    ("ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (3).",
     "set evaluator.judge.server.tensor_parallel_size to a divisor of 28"),
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/"
     "org/m/resolve/main/config.json.", "org/m is a gated model: accept its licence on its Hugging Face page, then "
     "export HF_TOKEN"),
    ("ImportError: libcudart.so.13: cannot open shared object file: No such file or directory",
     "pip install --force-reinstall torch==2.13.0"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.54 GiB",
     "the GPU ran out of memory"),
])
def test_the_root_cause_far_above_the_tail_is_found_with_its_fix(tmp_path, error, fix):
    path = log_with(tmp_path, f"{CORE}  File \"/venv/x.py\", line 1, in f", f"{CORE}{error}",
                    f"(EngineCore pid=4243) Process EngineCore:", f"(EngineCore pid=4243) {error}")
    n, text, found_fix = vllm_errors.root_cause(path, "evaluator.judge.server", "org/m")
    assert n == 6 and text == error  # the first occurrence, without vLLM's process and logger prefixes
    assert fix in found_fix, found_fix
    lines = vllm_errors.explain(path, "evaluator.judge.server", "org/m")
    assert lines[0] == f"root cause (line 6 of its log): {error}" and lines[1] == f"fix: {found_fix}"


def test_an_unknown_error_is_still_named_and_echoes_are_skipped(tmp_path):
    path = log_with(tmp_path, f"{CORE}KeyError: 'rope_scaling'")
    assert vllm_errors.root_cause(path) == (5, "KeyError: 'rope_scaling'", None)
    assert vllm_errors.explain(path) == ["root cause (line 5 of its log): KeyError: 'rope_scaling'"]
    only_echoes = log_with(tmp_path)
    assert vllm_errors.root_cause(only_echoes) is None and vllm_errors.root_cause(tmp_path / "none.log") is None
