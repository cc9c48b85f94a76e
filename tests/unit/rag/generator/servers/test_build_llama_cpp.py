"""scripts/build_llama_cpp.py's patches to llama.cpp: applied where their anchors are, refused with a
clear message where the source differs, and part of the build key."""

from __future__ import annotations

import importlib.util
import json

import pytest

from support import ROOT

spec = importlib.util.spec_from_file_location("build_llama_cpp", ROOT / "scripts" / "build_llama_cpp.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


def source_with_anchors(tmp_path, drop: int | None = None):
    """A llama.cpp tree whose ops.cpp holds every edit's anchor once, between other code
    (the anchor of edit ``drop`` left out)."""
    anchors = [a for edits in build.PATCHES.values() for a, _, _ in edits]
    body = "\n// other code\n".join(a for i, a in enumerate(anchors) if i != drop)
    ops = tmp_path / build.OPS
    ops.parent.mkdir(parents=True)
    ops.write_text("#include \"ops.h\"\n" + body + "\n// end\n")
    return ops


def test_the_patch_inserts_its_kernel_and_dispatches_to_it(tmp_path):
    ops = source_with_anchors(tmp_path)
    assert build.apply_patches(tmp_path) == ["flash_attn_rows"]
    text = ops.read_text()
    kernel = (build.PATCH_DIR / "flash_attn_rows.cpp").read_text()
    # the kernel sits before the reference function, which calls it first where it applies
    assert text.index(kernel) < text.index(build._ONE_CHUNK)
    assert text.index("ggml_fa_vec_rows(dst, ir0, ir1") < text.index("for (int ir = ir0; ir < ir1; ++ir)")
    assert "!params->use_ref && ggml_fa_vec_supported(q, k, v)" in text  # the reference stays reachable
    # the split-KV path hands every head to one call, so the heads of a token are computed together
    assert "q_head + 1" not in text and "params, dst, 0, (int) neq2, ic_start, ic_end" in text
    assert text.startswith("#include \"ops.h\"\n") and text.endswith("// end\n")


@pytest.mark.parametrize("drop", [0, 1, 2])
def test_a_source_without_an_anchor_stops_the_build_naming_the_edit(tmp_path, drop):
    ops = source_with_anchors(tmp_path, drop=drop)
    before = ops.read_text()
    with pytest.raises(SystemExit) as err:
        build.apply_patches(tmp_path)
    msg = str(err.value)
    assert f"patch flash_attn_rows edit {drop + 1}" in msg and "found 0" in msg
    assert "RAGSWEEP_LLAMA_PATCHES=0" in msg and str(ops) in msg
    assert ops.read_text() == before  # nothing half-patched


def test_the_patches_are_part_of_the_build_key(monkeypatch):
    key = build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS, build.patch_id())
    assert key != build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS)
    # unpatched (RAGSWEEP_LLAMA_PATCHES=0): the key earlier builds were cached under
    ident = json.dumps(["0.3.36", build.DISPATCH_CMAKE_ARGS, build.compiler_id(), build.platform.machine(),
                        f"cp{build.sys.version_info[0]}{build.sys.version_info[1]}"])
    assert build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS) == build.hashlib.sha256(ident.encode()).hexdigest()[:16]
    # a change to the edits is a new build (and so is one to the inserted file: patch_id hashes it)
    monkeypatch.setattr(build, "PATCHES", {"flash_attn_rows": build.PATCHES["flash_attn_rows"][:2]})
    assert build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS, build.patch_id()) != key
    for off in ("0", "off"):
        monkeypatch.setenv("RAGSWEEP_LLAMA_PATCHES", off)
        assert not build.patches_enabled()
    monkeypatch.delenv("RAGSWEEP_LLAMA_PATCHES")
    assert build.patches_enabled()
