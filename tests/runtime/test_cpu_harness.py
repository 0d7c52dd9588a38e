"""The CPU harness against the real installed sgl_kernel and sglang 0.5.9.

Each shim is shown twice in a fresh Python process: the real sglang code failing with the error the shim documents,
and the same code passing once the shim is named in EAGLE3LAB_SHIMS (so these tests also prove that the
sitecustomize reaches a child process). Shim 7's error needs a real forward pass, so it is shown on a real server.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests

from eagle3lab.runtime.cpu_harness import (
    ALL_SHIMS,
    CONTROL_SHIMS,
    SHIMS,
    SPEC_SHIMS,
    build_libcuda_stub,
    cpu_environment,
    driver_symbols,
    sgl_kernel_libraries,
)
from eagle3lab.runtime.cpu_harness import start_method
from eagle3lab.runtime.cpu_harness.environment import EAGER_ENV, VEC_ISA_TRUST_ENV
from eagle3lab.runtime.cpu_harness.start_method import FORK_ENV
from eagle3lab.runtime.cpu_harness.hooks import when_imported
from eagle3lab.runtime.cpu_harness.libcuda_stub import (
    CUDA_ERROR_STUB_LIBRARY,
    STUB_SONAME,
    stub_key,
    stub_source,
    undefined_symbols,
)
from eagle3lab.errors import HarnessBuildError
from eagle3lab.runtime.deployment import server_spec
from eagle3lab.runtime.server import ServerProcess, free_port, launch
from timing import patience


def run_child(code: str, shims: tuple[str, ...] = (), with_stub: bool = True, speculative: bool = False,
              args: tuple[str, ...] = ()) -> dict:
    """Run ``code`` in a fresh interpreter under the harness environment; it prints one JSON line last."""
    env = {**os.environ, **cpu_environment(shims=shims, speculative=speculative)}
    if not with_stub:
        env["LD_LIBRARY_PATH"] = os.environ.get("LD_LIBRARY_PATH", "")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env, capture_output=True,
                            check=False, text=True, timeout=patience(600))
    lines = result.stdout.strip().splitlines()
    assert lines, f"child printed nothing; stderr tail: {result.stderr[-2000:]}"
    return json.loads(lines[-1])


# --- stub libcuda -------------------------------------------------------------------------------------------

def test_driver_symbols_are_exactly_the_undefined_driver_api_of_sgl_kernel():
    libraries = sgl_kernel_libraries()
    symbols = driver_symbols(libraries)
    undefined = {name for lib in libraries for name in undefined_symbols(lib)}
    assert symbols and set(symbols) <= undefined
    assert all(re.fullmatch(r"cu[A-Z]\w*", name) for name in symbols)
    # The wheel also needs CUDA runtime and cuBLAS symbols; those come from real pip libraries, never the stub.
    others = {name for name in undefined if name.startswith(("cuda", "cublas"))}
    assert others and not others & set(symbols)


def test_stub_exports_every_symbol_and_each_returns_stub_library_error(tmp_path):
    symbols = driver_symbols(sgl_kernel_libraries())
    stub = ctypes.CDLL(str(build_libcuda_stub(root=tmp_path) / STUB_SONAME))
    assert {name: getattr(stub, name)() for name in symbols} == {name: CUDA_ERROR_STUB_LIBRARY for name in symbols}


def test_stub_is_cached_per_symbol_set(tmp_path):
    first = build_libcuda_stub(root=tmp_path)
    built_at = (first / STUB_SONAME).stat().st_mtime_ns
    assert build_libcuda_stub(root=tmp_path) == first
    assert (first / STUB_SONAME).stat().st_mtime_ns == built_at
    symbols = driver_symbols(sgl_kernel_libraries())
    assert stub_key(symbols) != stub_key(symbols[:-1])


def test_sgl_kernel_imports_only_with_the_stub():
    probe = """
        import json
        try:
            import sgl_kernel, torch
            print(json.dumps({"ok": True, "cuda": torch.cuda.is_available()}))
        except ImportError as exc:
            print(json.dumps({"ok": False, "error": str(exc)}))
    """
    without = run_child(probe, with_stub=False)
    assert not without["ok"] and "libcuda.so.1" in without["error"]
    assert run_child(probe) == {"ok": True, "cuda": False}


def test_missing_library_is_one_clear_line(tmp_path):
    with pytest.raises(HarnessBuildError) as err:
        driver_symbols([tmp_path / "no-such.so"])
    assert (err.value.problem, err.value.tool, err.value.path) == ("tool_failed", "nm", tmp_path / "no-such.so")
    assert "\n" not in str(err.value)


def test_no_symbols_is_an_error():
    with pytest.raises(HarnessBuildError) as err:
        stub_source([])
    assert err.value.problem == "no_symbols"


# --- environment --------------------------------------------------------------------------------------------

def test_cpu_environment_puts_stub_and_site_first_and_keeps_the_rest():
    env = cpu_environment(shims=SPEC_SHIMS, base={"LD_LIBRARY_PATH": "/opt/x", "PYTHONPATH": "/opt/y"})
    ld_paths = env["LD_LIBRARY_PATH"].split(os.pathsep)
    py_paths = env["PYTHONPATH"].split(os.pathsep)
    assert (Path(ld_paths[0]) / STUB_SONAME).is_file() and ld_paths[-1] == "/opt/x"
    assert (Path(py_paths[0]) / "sitecustomize.py").is_file() and py_paths[-1] == "/opt/y"
    assert env["EAGLE3LAB_SHIMS"].split(",") == list(SPEC_SHIMS)
    assert env["SGLANG_USE_CPU_ENGINE"] == "1" and env["SGLANG_DISABLE_CUDNN_CHECK"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and re.fullmatch(r"0-\d+", env["SGLANG_CPU_OMP_THREADS_BIND"])


VEC_ISA_PICK = ("import torch._inductor.cpu_vec_isa as isa; "
                "print(','.join(str(v) for v in isa.valid_vec_isa_list()), '|', str(isa.pick_vec_isa()))")


def test_trusting_cpuinfo_vector_isas_picks_what_inductors_own_probe_picks_on_this_machine():
    """The harness skips inductor's per-process ISA probe; that is only faithful if the pick stays the same."""
    env = {key: value for key, value in os.environ.items() if key != VEC_ISA_TRUST_ENV}
    probed = subprocess.run([sys.executable, "-c", VEC_ISA_PICK], env=env, capture_output=True, text=True,
                            timeout=patience(300))
    trusted = subprocess.run([sys.executable, "-c", VEC_ISA_PICK], capture_output=True, text=True,
                             env={**env, VEC_ISA_TRUST_ENV: cpu_environment(shims=())[VEC_ISA_TRUST_ENV]},
                             timeout=patience(120))
    assert probed.returncode == trusted.returncode == 0, probed.stderr[-2000:] + trusted.stderr[-2000:]
    assert trusted.stdout == probed.stdout and probed.stdout.strip()


def test_a_process_that_never_imports_sglang_pays_nothing_for_the_shims(tmp_path):
    """Every Python process of a launch runs the harness's sitecustomize (multiprocessing's resource tracker too):
    with every shim and the cycle timers installed, a process that imports no sglang must not import torch."""
    code = "import json, sys; print(json.dumps({'torch': 'torch' in sys.modules, 'shims': sys.modules.get("
    code += "'eagle3lab.runtime.cpu_harness.shims') is not None}))"
    env = {**os.environ, **cpu_environment(shims=SPEC_SHIMS, speculative=True),
           "EAGLE3LAB_CYCLE_TRACE": str(tmp_path / "cycles.jsonl")}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=patience(120))
    assert json.loads(child.stdout.strip().splitlines()[-1]) == {"torch": False, "shims": True}, child.stderr[-2000:]


# sglang's own function, under the harness's site folder: its `__wrapped__` is sglang's code as released, which
# must still choose spawn (else the harness's fork would be answering a line that no longer exists)
FORK_CHECK = """
import multiprocessing, types
import sglang.srt.entrypoints.engine as engine
args = types.SimpleNamespace(enable_symm_mem=False, enable_nccl_nvls=False, enable_metrics=False,
                             attention_backend="torch_native", custom_sigquit_handler=None)
engine._set_envs_and_config.__wrapped__(args)
print(multiprocessing.get_start_method())
engine._set_envs_and_config(args)
print(multiprocessing.get_start_method())
"""


def test_harness_forks_the_subprocesses_that_sglang_would_spawn():
    env = {**os.environ, **cpu_environment(shims=())}
    child = subprocess.run([sys.executable, "-c", FORK_CHECK], env=env, capture_output=True, text=True,
                           timeout=patience(300))
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.split() == ["spawn", "fork"]


def test_a_start_method_setting_of_the_caller_wins_and_zero_keeps_spawn():
    assert cpu_environment(shims=())[FORK_ENV] == "1"
    assert cpu_environment(shims=(), base={FORK_ENV: "0"})[FORK_ENV] == "0"
    assert start_method.install_from_environment({FORK_ENV: "0"}) is False
    assert start_method.install_from_environment({}) is False


# sglang's own compiled MoE top-k helper, as imported by a server process of the harness: dynamo must compile no frame
EAGER_CHECK = """
import torch, torch._dynamo.utils as dynamo_utils
from sglang.srt.layers.moe import topk
scores = torch.tensor([[0.1, 0.9, 0.4, 0.7]])
weights, ids = topk.grouped_topk_gpu(scores, scores, topk=2, renormalize=False, num_expert_group=1, topk_group=1)
print(ids.tolist(), dynamo_utils.counters["frames"]["total"])
"""


@pytest.mark.parametrize("eager", [True, False])
def test_the_harness_runs_sglangs_compiled_functions_eagerly_and_a_caller_may_compile(eager):
    base = {key: value for key, value in os.environ.items() if key != EAGER_ENV}
    env = {**base, **cpu_environment(shims=(), base=base if eager else {**base, EAGER_ENV: "0"})}
    child = subprocess.run([sys.executable, "-c", EAGER_CHECK], env=env, capture_output=True, text=True,
                           timeout=patience(300))
    assert child.returncode == 0, child.stderr[-2000:]
    ids, frames = child.stdout.split("]]")
    assert sorted(eval(ids + "]]")[0]) == [1, 3]  # the same answer either way
    assert (int(frames) == 0) is eager, f"dynamo compiled {frames.strip()} frames"


def test_a_vec_isa_setting_of_the_caller_wins():
    assert cpu_environment(shims=(), base={VEC_ISA_TRUST_ENV: "0"})[VEC_ISA_TRUST_ENV] == "0"


def test_bare_environment_names_no_shim():
    assert cpu_environment(shims=())["EAGLE3LAB_SHIMS"] == ""


def test_unknown_shim_is_one_line_listing_known_ones():
    with pytest.raises(HarnessBuildError) as err:
        cpu_environment(shims=("no_such_shim",))
    assert (err.value.problem, err.value.shim) == ("unknown_shim", "no_such_shim")
    assert "known shims: mla_torch_native" in str(err.value)  # the line lists the choices
    assert "\n" not in str(err.value)


def test_shim_sets_and_documentation():
    assert set(CONTROL_SHIMS) <= set(SPEC_SHIMS) <= set(ALL_SHIMS) == set(SHIMS)
    assert sorted(SHIMS[name].obstacle for name in SPEC_SHIMS) == list(range(7, 18))
    for shim in SHIMS.values():
        assert shim.module.startswith(("sglang.srt.", "triton.runtime.")) and "kimi_k25" not in shim.module
        # the error avoided, quoted; or, for sglang's silent CPU paths, what happens instead of an error; or, for
        # the harness's own costs (interpreted Triton, torch_native's whole-sequence attention), the cost
        assert re.match(r"(\w+Error: |UserWarning-only: |Silent no-op: |Harness cost, not an error: )",
                        shim.avoids), shim.name


# --- post-import hooks --------------------------------------------------------------------------------------

def test_hook_runs_once_right_after_the_module_body(tmp_path, monkeypatch):
    (tmp_path / "e3l_hooked_mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    when_imported("e3l_hooked_mod", lambda module: seen.append(module.VALUE))
    import importlib

    import e3l_hooked_mod  # noqa: F401  (the import is the action under test)

    importlib.import_module("e3l_hooked_mod")
    assert seen == [1]
    when_imported("e3l_hooked_mod", lambda module: seen.append(module.VALUE + 1))  # already imported: at once
    assert seen == [1, 2]
    sys.modules.pop("e3l_hooked_mod")


# --- the shims, each without and with ----------------------------------------------------------------------

SHIM7_DISPATCH = """
    import json
    from types import SimpleNamespace
    from eagle3lab.runtime.tinymodel.probe import _init_sglang_single_process
    _init_sglang_single_process()
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.models.deepseek_common.attention_backend_handler import AttentionBackendRegistry
    handler = AttentionBackendRegistry.get_handler("torch_native")
    first_prefill = SimpleNamespace(forward_mode=ForwardMode.EXTEND, extend_prefix_lens_cpu=[0])
    print(json.dumps({"handler": handler.__name__, "method": handler(SimpleNamespace(), first_prefill).name}))
"""


def test_shim7_torch_native_prefill_takes_absorbed_mla_instead_of_triton_mha():
    """Without the shim sglang picks the triton handler (MHA prefill over the latent); see the server test."""
    assert run_child(SHIM7_DISPATCH) == {"handler": "handle_attention_triton", "method": "MHA"}
    assert run_child(SHIM7_DISPATCH, shims=("mla_torch_native",))["method"] == "MLA"


SHIM8_POOL = """
    import json, torch
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
    try:
        pool = MHATokenToKVPool(size=16, page_size=1, dtype=torch.bfloat16, head_num=1, head_dim=16, layer_num=2,
                                device="cpu", enable_memory_saver=False, enable_kv_cache_copy=True)
        print(json.dumps({"ok": True, "config": pool._kv_copy_config, "k": list(pool.k_buffer[0].shape)}))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


def test_shim8_kv_pool_with_kv_copy_starts_on_cpu_only_with_shim():
    without = run_child(SHIM8_POOL)
    assert not without["ok"] and without["error"] in SHIMS["kv_copy_warmup_cpu"].avoids
    with_shim = run_child(SHIM8_POOL, shims=("kv_copy_warmup_cpu",))
    assert with_shim["ok"] and with_shim["config"] is None and with_shim["k"][0] > 16


SHIM9_SET_EMBED = """
    import json, torch
    from types import SimpleNamespace
    from sglang.srt.models.llama import LlamaForCausalLM
    # The real unbound method on a stand-in draft model: building a whole LlamaForCausalLM is not needed.
    draft = SimpleNamespace(config=SimpleNamespace(hidden_size=8), model=torch.nn.Module())
    draft.model.embed_tokens = torch.nn.Embedding(4, 8)
    shared = torch.nn.Parameter(torch.ones(4, 8))
    try:
        LlamaForCausalLM.set_embed(draft, shared)
        print(json.dumps({"ok": True, "shared": draft.model.embed_tokens.weight is shared}))
    except Exception as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


def test_shim9_set_embed_shares_the_embedding_on_cpu_only_with_shim():
    without = run_child(SHIM9_SET_EMBED)
    assert not without["ok"] and "Error 34: CUDA driver is a stub library" in without["error"]
    assert without["error"].startswith(SHIMS["set_embed_cuda_sync"].avoids.split(" ... ")[0])
    assert run_child(SHIM9_SET_EMBED, shims=("set_embed_cuda_sync",)) == {"ok": True, "shared": True}


# --- real servers -------------------------------------------------------------------------------------------

@pytest.mark.server
@pytest.mark.parametrize("shims", [(), CONTROL_SHIMS], ids=["without_shim7", "with_shim7"])
def test_server_control_run_needs_shim7_to_serve(tmp_path, cpu_profile, tiny_models, shims):
    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=shims, port=free_port())
    server = ServerProcess(spec, tmp_path / "server.log")
    server.start()
    try:
        outcome = server.wait(cpu_profile.ready_timeout_s)
        if not shims:  # sglang's own start-up warm-up runs the first prefill and dies on it
            assert outcome.status == "died"
            assert "Expected size for first two dimensions of batch2 tensor" in outcome.log_text()
            return
        assert outcome.status == "ready", outcome.log_text()[-3000:]
        for prompt in ({"text": "a b c"}, {"input_ids": [5, 6, 7, 8, 9]}):
            reply = requests.post(f"{spec.base_url}/generate", timeout=patience(120), json={
                **prompt, "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}})
            assert reply.status_code == 200, reply.text
            assert reply.json()["meta_info"]["completion_tokens"] == 8
    finally:
        server.stop()


def test_site_folder_still_runs_another_sitecustomize(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['E3L_OTHER_SITE'] = 'ran'\n")
    env = {**os.environ, **cpu_environment(shims=())}
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}{os.pathsep}{tmp_path}"
    code = "import os; print(os.environ.get('E3L_OTHER_SITE'))"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "ran"


WRAPPER_CRASH = "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute 'set_eagle3_layers_to_capture'"


@pytest.mark.parametrize("shims", [(), ALL_SHIMS], ids=["bare_harness", "all_shims"])
def test_speculative_launches_get_triton_interpreter_and_exactly_their_shims(cpu_profile, tiny_models, shims):
    spec = server_spec(cpu_profile, tiny_models, speculative=True, shims=shims, port=free_port())
    assert spec.env["TRITON_INTERPRET"] == "1" and spec.env["EAGLE3LAB_SHIMS"] == ",".join(shims)


@pytest.mark.server
def test_bare_harness_eagle3_launch_dies_on_the_wrapper(eagle3_crash):
    """The stub and environment alone reproduce the real crash (the session's one bare EAGLE-3 launch, which
    notebook 01's ``reproduce_crash`` makes with no shim)."""
    assert eagle3_crash.outcome.status == "died" and WRAPPER_CRASH in eagle3_crash.outcome.log_text()


@pytest.mark.server
def test_server_eagle3_launch_still_dies_on_the_wrapper_with_every_shim(tmp_path, cpu_profile, tiny_models):
    """No shim masks the crash: not the start-up shims, and not the speculative ones that run sglang's EAGLE loop
    on CPU (with Triton's interpreter on, as in a real speculative CPU server)."""
    assert set(SPEC_SHIMS) <= set(ALL_SHIMS)
    spec = server_spec(cpu_profile, tiny_models, speculative=True, shims=ALL_SHIMS, port=free_port())
    outcome = launch(spec, tmp_path / "server.log", cpu_profile.ready_timeout_s)
    assert outcome.status == "died" and WRAPPER_CRASH in outcome.log_text()
