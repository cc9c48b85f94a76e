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


def test_the_edits_are_part_of_the_build_key(monkeypatch):
    key = build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS, build.edits_id(True))
    # unpatched (RAGSWEEP_LLAMA_PATCHES=0) is another build, and so is every earlier one (untrimmed)
    assert key != build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS, build.edits_id(False))
    old = json.dumps(["0.3.36", build.DISPATCH_CMAKE_ARGS, build.compiler_id(), build.platform.machine(),
                      f"cp{build.sys.version_info[0]}{build.sys.version_info[1]}"])
    assert key != build.hashlib.sha256(old.encode()).hexdigest()[:16]
    # a change to the edits is a new build (and so is one to the inserted file: edits_id hashes it)
    monkeypatch.setattr(build, "PATCHES", {"flash_attn_rows": build.PATCHES["flash_attn_rows"][:2]})
    assert build.build_key("0.3.36", build.DISPATCH_CMAKE_ARGS, build.edits_id(True)) != key
    unpatched = build.edits_id(False)
    monkeypatch.setattr(build, "TRIMS", {"cpu_variants": build.TRIMS["cpu_variants"]})
    assert build.edits_id(False) != unpatched  # so is a change to the trims, patched or not
    for off in ("0", "off"):
        monkeypatch.setenv("RAGSWEEP_LLAMA_PATCHES", off)
        assert not build.patches_enabled()
    monkeypatch.delenv("RAGSWEEP_LLAMA_PATCHES")
    assert build.patches_enabled()


def cmake_tree(tmp_path, drop_tool: str | None = None):
    """A llama.cpp tree holding the CMake text the trims edit, as llama-cpp-python 0.3.36 has it."""
    ggml = tmp_path / "ggml/src/CMakeLists.txt"
    ggml.parent.mkdir(parents=True)
    ggml.write_text("function(ggml_add_cpu_backend_variant tag_name)\n    set(GGML_CPU_TAG_NAME ${tag_name})\n"
                    "endfunction()\n\nif (GGML_CPU_ALL_VARIANTS)\n    ggml_add_cpu_backend_variant(x64)\nendif()\n")
    tools = tmp_path / "tools/CMakeLists.txt"
    tools.parent.mkdir(parents=True)
    block = build._TOOLS if drop_tool is None else build._TOOLS.replace(f"    add_subdirectory({drop_tool})\n", "")
    tools.write_text("if (EMSCRIPTEN)\nelse()\n" + block + "endif()\n")
    for rel, target in (("common/CMakeLists.txt", "${TARGET}"), ("tools/mtmd/CMakeLists.txt", "mtmd")):
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"add_library({target} a.cpp)\n\nset_target_properties({target} PROPERTIES\n" + build._VERSION_PROPS)
    (tmp_path / "CMakeLists.txt").write_text("add_subdirectory(src)\n\nadd_subdirectory(vendor)\n\nif (LLAMA_BUILD_COMMON)\n    add_subdirectory(common)\n"
                                              "endif()\nif (LLAMA_BUILD_TOOLS)\n    add_subdirectory(tools)\nendif()\n")
    return ggml, tools


def test_the_trims_build_the_listed_cpu_variants_and_llama_server_alone(tmp_path):
    ggml, tools = cmake_tree(tmp_path)
    assert build.apply_trims(tmp_path) == ["cold_code_O1", "cpu_variants", "server_only", "unity_batches"]
    # vendor (cpp-httplib), common, the tools and libmtmd at -O1, added after the option; libllama (src) before it
    root = (tmp_path / "CMakeLists.txt").read_text()
    assert root.index("add_subdirectory(src)") < root.index("add_compile_options(-O1)") < root.index("add_subdirectory(vendor)")
    g = ggml.read_text()
    assert "NOT tag_name IN_LIST RAGSWEEP_CPU_VARIANTS" in g and "return()" in g
    assert f"set(RAGSWEEP_CPU_VARIANTS {' '.join(build.CPU_VARIANTS)})" in g
    assert g.index("set(RAGSWEEP_CPU_VARIANTS") < g.index("if (GGML_CPU_ALL_VARIANTS)")
    assert "if (NOT DEFINED RAGSWEEP_CPU_VARIANTS)" in g  # --test-backend-ops builds two of them
    t = tools.read_text()
    subdirs = [ln.strip() for ln in t.splitlines() if "add_subdirectory" in ln]
    assert subdirs == ["add_subdirectory(ui)", "add_subdirectory(server)", "add_subdirectory(mtmd)"]
    # libmtmd (which llama-server links) without its command-line programs
    assert t.index("set(LLAMA_BUILD_TOOLS OFF)") < t.index("add_subdirectory(mtmd)") < t.index("unset(LLAMA_BUILD_TOOLS)")
    # libmtmd, which llama-server links but never runs, at -O0, after the server's targets were made
    assert t.index("add_subdirectory(server)") < t.index("add_compile_options(-O0)") < t.index("add_subdirectory(mtmd)")
    # the chat parsers and libmtmd's model encoders compiled in batches, every other source alone
    common = (tmp_path / "common/CMakeLists.txt").read_text()
    mtmd = (tmp_path / "tools/mtmd/CMakeLists.txt").read_text()
    assert "set_target_properties(${TARGET} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)" in common
    assert 'list(FILTER _ragsweep_alone EXCLUDE REGEX "/parsers/[^/]*$")' in common
    assert 'list(FILTER _ragsweep_alone EXCLUDE REGEX "^models/")' in mtmd
    assert all("SKIP_UNITY_BUILD_INCLUSION ON" in t and t.index(build._VERSION_PROPS) < t.index("UNITY_BUILD ON")
               for t in (common, mtmd))
    # every x86-64 level keeps a variant: SSE2, SSE4.2, AVX, AVX2, AVX-512, AMX
    assert {"x64", "sse42", "sandybridge", "haswell", "skylakex", "sapphirerapids"} <= set(build.CPU_VARIANTS)


def test_a_changed_tool_list_stops_the_build_and_writes_nothing(tmp_path):
    ggml, tools = cmake_tree(tmp_path, drop_tool="tts")
    files = sorted(tmp_path.rglob("CMakeLists.txt"))
    before = [f.read_text() for f in files]
    with pytest.raises(SystemExit) as err:
        build.apply_trims(tmp_path)
    assert "trim server_only edit 1" in str(err.value) and "found 0" in str(err.value) and "TRIMS" in str(err.value)
    assert [f.read_text() for f in files] == before  # no file written, the ones before it included


def test_the_pinned_sdist_is_checked_by_hash(tmp_path):
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    sdist.write_bytes(b"not the published archive")
    with pytest.raises(SystemExit) as err:
        build.check_source(tmp_path, "0.3.36", sdist, patched=True)
    assert build.SDIST_SHA256["0.3.36"] in str(err.value) and "do not build it" in str(err.value)


def test_an_unpinned_version_builds_only_if_the_functions_the_patch_depends_on_are_unchanged(tmp_path, capsys,
                                                                                           monkeypatch):
    ops = tmp_path / build.OPS
    ops.parent.mkdir(parents=True)
    sdist = tmp_path / "llama_cpp_python-9.9.9.tar.gz"
    sdist.write_bytes(b"a newer release")
    names = list(build.FINGERPRINTS)
    ops.write_text("".join(f"static void {n}(int x) {{\n    return;\n}}\n\n" for n in names))
    with pytest.raises(SystemExit) as err:
        build.check_source(tmp_path, "9.9.9", sdist, patched=True)
    assert all(n in str(err.value) for n in names) and "RAGSWEEP_LLAMA_PATCHES=0" in str(err.value)
    build.check_source(tmp_path, "9.9.9", sdist, patched=False)  # the opt-out builds it as published
    # the same text as fingerprinted: a newer release with these functions unchanged builds, with a note
    fingerprints = {n: build.hashlib.sha256(build.function_text(ops.read_text(), n).encode()).hexdigest()[:16]
                    for n in names}
    monkeypatch.setattr(build, "FINGERPRINTS", fingerprints)
    build.check_source(tmp_path, "9.9.9", sdist, patched=True)
    assert "is not pinned" in capsys.readouterr().out


def test_function_text_is_the_whole_function():
    src = "int a;\nstatic void f(int x) {\n    if (x) {\n        x++;\n    }\n}\nvoid g() {\n}\n"
    assert build.function_text(src, "f") == "static void f(int x) {\n    if (x) {\n        x++;\n    }\n}\n"
    assert build.function_text(src, "g") == "void g() {\n}\n"
    assert build.function_text(src, "h") is None
