# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: eagle3lab (sglang 0.5.9)
#     language: python
#     name: eagle3lab
# ---

# %% [markdown]
# # 01 · Reproduce the Kimi-K2.5 + EAGLE-3 start-up crash
#
# The engineer launched sglang 0.5.9 with `--speculative-algorithm EAGLE3` on Kimi-K2.5 and the server died at
# start-up. This notebook launches the **real** sglang server the same way, reads the crash out of the server log,
# asserts its signature (the notebook fails if the server does *not* crash this way), and then shows the same
# model starting fine without speculative decoding.
#
# The `cpu` profile runs a tiny Kimi-K2.5-shaped model on this machine; `blackwell-8x` runs the incident's real
# deployment with the same code.

# %%
from eagle3lab.repro import crashrepro
from eagle3lab.runtime import deployment, envinfo, sglang_args
from eagle3lab import preflight
from eagle3lab.notebook import params as nbparams, show
from eagle3lab.notebook.patch_and_bench.lossless_check import control_floor
from eagle3lab import sidecars
from eagle3lab.report.plots import launch as plots_launch
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS
from eagle3lab.paths import repo_dir

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile: params/<profile>.yaml (cpu or blackwell-8x)
overrides: dict = {}  # profile keys to override, e.g. {"port": 30123}; profile keys may also be passed directly
expected_exception: str = "AttributeError"  # exception the EAGLE-3 launch must die with
expected_class: str = "KimiK25ForConditionalGeneration"  # model class named in the error
expected_attribute: str = "set_eagle3_layers_to_capture"  # member the runtime asks the wrapper for
control_prompt: str = "the quick brown fox"  # text prompt for the control run's /generate
control_max_new_tokens: int = 16  # tokens the control run generates

# %%
params = nbparams.resolve(globals())
P = params.profile
logs_dir = repo_dir("artifacts") / "logs"
show.table(P.model_dump(), ["profile key"])

# %% [markdown]
# ## Preflight
# Everything the deployment needs, checked before any launch: GPUs against `tp_size`, the sglang release and
# whether it is still pristine, both checkpoints (on disk, complete, size), free disk, both launch command lines
# through sglang's own `ServerArgs`, and the drafter's aux layer ids with the layers they make sglang capture.
# A problem stops the notebook here with one line and its fix. Passed over for the `cpu` profile (tiny models
# generated here, no GPU).

# %%
checks = preflight.require(P, quick=False, echo=None)
show.table(checks.rows())

# %% [markdown]
# ## Environment

# %%
environment = envinfo.environment_table()
show.table(environment)

# %% [markdown]
# ## The model
# For `cpu`: a generated Kimi-K2.5-shaped checkpoint (DeepSeek-V3 text model with MLA and MoE, a tiny MoonViT
# vision tower, real safetensors in the real naming) and a tiny `LlamaForCausalLMEagle3` drafter, cached by key.

# %%
models = deployment.resolve_models(P)
show.table(vars(models))

# %% [markdown]
# ## Launch with EAGLE-3
# The same flags as the incident (`--speculative-algorithm EAGLE3 --speculative-num-steps 3
# --speculative-eagle-topk 1 --speculative-num-draft-tokens 4`). On `cpu` only the stub driver library and the
# environment are added: no shim touches anything on the way to the crash.

# %%
crash = crashrepro.reproduce_crash(P, models, logs_dir)
print(" ".join(crash.argv))
show.table(crash.table())

# %% [markdown]
# ### The traceback, as the scheduler printed it

# %%
print(crash.report.traceback_text if crash.report else crash.outcome.log_text()[-4000:])

# %% [markdown]
# ### Structured crash report

# %%
show.table(crashrepro.crash_table(crash.report)) if crash.report else "no traceback in the log"

# %% [markdown]
# ### The expected signature
# This cell fails the notebook if the server did not crash, or crashed with anything else.

# %%
expected = crashrepro.ExpectedCrash(expected_exception, expected_class, expected_attribute)
report = crashrepro.expect_signature(crash, expected)
print(f"reproduced: {report.signature}\nraised at:  {report.call_site}")

# %% [markdown]
# ## Control: the same model without speculative decoding
# It starts and answers a `/generate`, so the crash is about the EAGLE-3 path, not the model.

# %%
control = crashrepro.control_run(P, models, logs_dir, CONTROL_SHIMS, control_prompt, control_max_new_tokens,
                                 on_ready=control_floor(P, models))
show.table(control.table())

# %% [markdown]
# ### The noise floor, measured first (bf16 profiles with `lossless_noise_floor`)
# On the same server, before it stops: the baseline swept at concurrency 1 and at the sweep's highest on the same
# prompts, greedy. How much batching alone changes its output is the floor notebook 03's lossless check holds the
# EAGLE-3 arm to (the 95% lower bound over the prompts); fp32 profiles need none (exact equality).

# %%
show.table({k: v for k, v in control.served.to_dict().items() if k != "per_prompt"}) if control.served else \
    "no noise floor: the profile runs fp32 or does not ask for one"

# %% [markdown]
# ## Timings (measured here)

# %%
timings = crashrepro.timings_table(crash, control)
show.table(timings)

# %% [markdown]
# ### Memory: who sized it, and what sglang chose (read from each server log's `server_args=` line)

# %%
memory = sglang_args.memory_rows(P.mem_fraction_static, {"EAGLE-3": crash.outcome.log_path,
                                                         "control": control.log_path})
show.table(memory)

# %%
timings_png = repo_dir("figures") / f"01_launch_timings_{P.name}.png"
plots_launch.draw_launch_timings(timings, P.name, sidecars.today()).savefig(timings_png, dpi=110)
show.images([timings_png])

# %%
sidecars.write(sidecars.CrashReproSidecar(
    profile=P.name, parameters=params.values, profile_values=P.model_dump(), environment=environment,
    models=vars(models), preflight=checks.to_dict(), memory=memory,
    crash={**crash.summary(), "argv": crash.argv, "report": report.to_dict()},
    control={**control.summary(), "argv": control.argv},
    noise_floor=control.served.to_dict() if control.served else None))
