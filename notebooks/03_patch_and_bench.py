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
# # 03 · Patch the wrapper, relaunch until every hook passes, verify capture, benchmark
#
# Notebook 02 found, from sglang's own source, which EAGLE-3 members the runtime needs from the Kimi-K2.5
# wrapper and which it lacks. Here the fix is applied to the installed sglang package (and always restored),
# the real server is relaunched after each patch, the inner model's hidden-state capture is checked on sglang's
# own `ModelRunner`, and throughput and acceptance are measured against the no-speculation baseline.

# %%
from eagle3lab.notebook import model_validation as nbvalidation, params as nbparams, patch_bench_run as nb03, show

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile: params/<profile>.yaml (cpu or blackwell-8x)
overrides: dict = {}  # profile keys to override, e.g. {"bench_concurrency": [1, 2]}; keys may also be passed directly
patch: str = "kimi_k25-eagle3-delegation"  # the fix: a name in patches/ or a path; the one-method patch is always shown too
prompt_kind: str = "profile"  # benchmark prompts: "ids" (token ids), "text", "chat" (bundled questions, chat template) or "profile" (its bench_prompt_kind)
capture: bool = True  # run the in-process capture check (cpu profile only)
bench: bool = True  # run the benchmark arms
cross_check_with_bench_serving: bool = True  # also run sglang.bench_serving on the baseline server
experiment_concurrency: list = [1]  # concurrencies of the EAGLE-3 experiment arms (untrained drafter, shifted layers); [] skips them
control_concurrency: list = [4]  # the control arm also runs here: its cycle at two batch sizes gives the cost model the host work per running request
interleave_layer_mismatch: bool = True  # the layer-mismatch arm joins the interleaved launch (one more server) at concurrency 1: its throughput against the headline arm's in the same rounds

# %%
run = nb03.start(globals())
run.summary()

# %% [markdown]
# The EAGLE-3 arms: the headline drafter over the whole sweep, and the experiments around it (fewer points).

# %%
run.plans_table()

# %% [markdown]
# ## What notebook 02 says the patch must delegate

# %%
run.load_trace()

# %% [markdown]
# ## The patches
# Unified diffs against the sglang 0.5.9 package layout. The full fix must delegate exactly the members the trace
# found missing (checked here from the patch's own source); the one-method patch is the engineer's first attempt.

# %%
run.patch_table()

# %%
run.expect_patch_covers_trace()

# %% [markdown]
# ## Capture check: does the inner model capture what the drafter reads?
# sglang's own `ModelRunner`, built the way `sglang.bench_one_batch` builds it, with the EAGLE-3 server
# arguments; unpatched, then patched, with real prefill and decode forwards (`cpu` profile).

# %%
run.capture_check()

# %%
run.expect_capture()

# %%
run.agreement_table()

# %% [markdown]
# ## Relaunch chain
# unpatched -> one-method patch -> full patch, each a real launch with EAGLE-3 on the installed package (patched
# for that launch's start-up only). The outcome of each step is read from the server log, not assumed; a server
# that comes up is asked for one greedy `/generate`. On `cpu` the speculative loop is sglang 0.5.9's own, run
# by the CPU harness (topk 1). The full-patch server stays up: the EAGLE-3 arm below is measured on it.

# %% [markdown]
# The servers launched from here on record, on the CPU harness, every decode step and EAGLE-3 cycle by component
# (timers around sglang's own functions, `bench.cycle`), one JSON line per scheduler call.

# %%
run.start_cycle_trace()

# %%
run.relaunch_chain()

# %% [markdown]
# This cell fails the notebook if a wrapper error survives the full patch, or if the patched server does not
# answer `/generate` with speculative decoding, unless it stops at a setting that is still GPU-only (on CPU:
# topk > 1, which the harness refuses in one line).

# %%
run.expect_chain()

# %% [markdown]
# ## Benchmark: baseline vs EAGLE-3
# Same prompts, same sweep. Per request: TTFT, inter-token latency (per token: a chunk of k tokens spreads its gap
# over k tokens, as `bench_serving` does; the per-chunk gap is kept apart), end-to-end latency, completion tokens
# and acceptance from the server's own counts, and the generated ids. Every finished request is on disk (JSONL)
# at once. The EAGLE-3 arm is measured on the chain's full-patch server; the experiment arms get their own.

# %%
run.config_table()

# %% [markdown]
# What the CPU harness changes on these servers against a GPU host, read off their launch environments (obstacle
# numbers of `runtime/cpu_harness`): what both servers share beside what only the EAGLE-3 server pays.

# %%
run.harness_table()

# %% [markdown]
# The sidecar is written after each arm (`complete` false until the last cell), so a failure after the benchmark
# keeps every arm already measured.

# %%
run.open_partial_sidecar()

# %%
run.measure()  # fails the notebook if an arm stalled or died

# %% [markdown]
# ### Launch to launch: the headline pair relaunched
# The same two servers launched again (`bench_launch_repeats` more times; the profile's default for `cpu` is 1),
# each swept at concurrency 1 in mirrored order, so that a slow spell of a shared machine falls on both arms. Every
# pair's speedup, and its plain step and cycle from the harness timers of those launches: one launch's speedup is
# one draw when the pairs disagree.

# %%
run.relaunch_pair()

# %%
run.spread_verdict()

# %% [markdown]
# The interleaved launch measured every concurrency of `bench_interleave_concurrency` in each round, so each point
# has both arms in the same spells of the machine: the pooled rates (client-seen and decode-only) and the speedup's
# bootstrap interval over the rounds. The cost model's run check below is scored on these too.

# %%
run.interleaved_table()

# %% [markdown]
# ### One EAGLE-3 cycle by component, against one plain decode step
# Mean exclusive milliseconds per plain step (baseline server) and per cycle (EAGLE-3 server) at batch size 1,
# measured by the timers in the servers above. "Harness only" marks the GPU kernels this CPU runs as torch ports:
# on a GPU each is one kernel launch. The cycle in plain steps is the break-even tokens per request per cycle.

# %%
run.cycle_components()

# %%
run.cycle_figure_shown()

# %% [markdown]
# ### Where each point's time went: decode batches, prefill batches, the rest
# The same timers, lined up with each point's measured window (wall clock): the scheduler's decode batches (plain
# steps or cycles), its prefill batches (each new request's prompt; with EAGLE-3 the drafter's extend too), and the
# rest of the window (idle, requests in and out), in milliseconds per decode batch. The bench's decode-only rate
# pays all three; a decode cost model counts only the first.

# %%
run.server_time_table()

# %%
run.server_time_figure_shown()

# %% [markdown]
# ### Lossless: speculative output must equal the baseline's greedy output, token for token
# Every prompt, every speculative arm, against the baseline at the same concurrency. Concurrency 1 is required
# (one request per batch in both arms); other levels are shown. A profile that runs fp32 fails the notebook on any
# difference; a bf16 profile records per prompt where the outputs part and fails only below its
# `lossless_min_agreement` (verify and decode do not give bit-identical bf16 logits; see `bench/lossless.py`).

# %%
run.lossless_table()

# %%
run.expect_lossless()

# %% [markdown]
# ### Acceptance, three ways
# Ours (completion tokens / verify steps), the server's per-request `spec_accept_length` (must agree exactly), and
# the server's lifetime `avg_spec_accept_length` after the flush before each point (tokens per verify step without
# the prefill token, refreshed every 40 steps), next to the same quantity rebuilt from the per-request histograms.

# %%
run.acceptance_table()

# %%
run.expect_acceptance_consistent()

# %% [markdown]
# Served at concurrency 1 next to the drafter's own offline simulation of sglang's greedy verify on the same
# prompts (transformers, recorded when it was trained): the harness's draft, verify and draft-extend attention have
# to reproduce what the drafter was trained and scored on.

# %%
run.offline_table()

# %% [markdown]
# ### The layer-mismatch experiment, measured
# The trained drafter served twice on the same prompts: with the aux layer ids it was trained on, and with each id
# one layer early, which is what sglang 0.5.9's CUDA-graph capture hands it while eager forwards hand it the
# trained ones. The tiny target's magnitude does not transfer to Kimi-K2.5's 61 layers; the mechanism is the same.

# %%
run.mismatch_table()

# %% [markdown]
# What the shift costs in throughput: the layer-mismatch arm measured in the interleaved launch's rounds, on the
# same prompts as the headline EAGLE-3 arm and in the same spells of the machine (its rate over the headline
# arm's, with the bootstrap interval over the rounds).

# %%
run.variant_table()

# %% [markdown]
# ### Speedup, measured here

# %%
run.speedup_table()

# %% [markdown]
# ### Sampling
# On CPU, sglang 0.5.9 verifies greedily even at temperature > 0 (only a log warning). The speculative CPU servers
# refuse non-greedy sampling with one line instead (and the benchmark refuses such a workload before it starts).

# %%
run.sampling_table()

# %% [markdown]
# ### A second latent defect: `verify_tree_greedy_func` has no CPU branch
# Read from the installed sglang's syntax tree: the device dispatch ends without an `else`, so on a CPU the function
# returns its buffers untouched, and its caller allocated them with `torch.empty`.

# %%
run.dispatch_gap_evidence()

# %% [markdown]
# ### Cross-check with sglang's own `bench_serving` (same server, same workload)

# %%
run.cross_check_table()

# %% [markdown]
# ### Figures (measured points only, labelled with profile and date)

# %%
run.bench_figures()

# %% [markdown]
# ## Why no speedup? Diagnostics on this run's evidence

# %%
run.diagnose()

# %% [markdown]
# ## Why no speedup? The decode cost model for the incident's deployment
# Modelled, not measured: 8x RTX PRO 6000 Blackwell over PCIe, TP 8, Kimi-K2.5 INT4, overhead calibrated on the
# engineer's reported 63.6 tok/s. Reported figures are drawn hollow; this run's measured points appear only on
# the figures of the deployment they were measured on.

# %%
prediction = nb03.incident_prediction()
nb03.side_by_side(prediction)

# %%
nb03.break_even(prediction)

# %%
run.model_figures()

# %% [markdown]
# ### How far to trust the model: the validation protocol
# Published speedup measurements (`src/eagle3lab/costmodel/data/spec_validation.yaml`, each source with its URL),
# under the protocol of `costmodel.validation.validation_report`, rendered as REPORT.md renders it: development and
# held-out sources split before anything was fitted, the acceptance length never fitted where a source publishes it,
# the held-out sources evaluated once with the frozen constants. Only the out-of-sample group is a validation; its
# verdict against the goal is computed from the number.

# %%
model_validation = nbvalidation.protocol_view()
show.markdown(model_validation.markdown())

# %% [markdown]
# Every group's MAPE (%) beside the naive baselines' over the same points (`--` where a baseline is not defined),
# and the trend judged point by point (each step from one batch size to the next, published against predicted).

# %%
show.table(model_validation.groups)

# %% [markdown]
# Sweeps of draft steps (one source, one batch size, only the number of draft steps changes): where the measured
# speedup peaks against where the model's does.

# %%
nb03.sweeps_table(model_validation)

# %% [markdown]
# Source by source: split, MAPE beside the naive baselines, largest error, and whether the source capped running
# requests.

# %%
show.table(model_validation.sources)

# %%
nb03.validation_figure()

# %% [markdown]
# Series by series and point by point: published against predicted, and whether each point was fitted.

# %%
validation = nb03.validate()
nb03.trend_table(validation)

# %%
nb03.validation_points(validation)

# %% [markdown]
# MAPE per source under other assumed decode contexts: how much the result rests on that one assumption.

# %%
show.table(model_validation.context)

# %%
run.write_sidecar()
