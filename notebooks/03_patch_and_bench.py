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
from eagle3lab.fix import capture_check, capture_trace, relaunch
from eagle3lab.runtime import deployment, envinfo
from eagle3lab.notebook import params as nbparams, show
from eagle3lab import sidecars
from eagle3lab.bench import acceptance, lossless
from eagle3lab.notebook import arm_capture, patch_and_bench as patchbench
from eagle3lab.notebook import model_validation as nbvalidation
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, BenchReport, point_rows
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
from eagle3lab.trace import silent_noop
from eagle3lab.trace.sources import open_source
from eagle3lab.paths import repo_dir
from eagle3lab.costmodel import perfmodel
from eagle3lab.report.plots import model as model_plots
from eagle3lab.report.incident_model import incident_report
from eagle3lab.report.plots.bench import draw_bench_figures
from eagle3lab.report.plots.cycle import draw_cycle_figure, draw_server_time_figure
from eagle3lab.bench import cycle, host, launch_spread, server_time
from eagle3lab.report.figures import model_figures

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
params = nbparams.resolve(globals())
P = params.profile
prompt_kind = patchbench.prompt_kind_for(P, prompt_kind)
logs_dir = repo_dir("artifacts") / "logs"
bench_dir = repo_dir("artifacts") / f"03_bench.{P.name}"
models = deployment.resolve_models(P)
shims = SPEC_SHIMS if P.cpu_harness else ()
drafters = patchbench.resolve_drafters(P, models)
plans = patchbench.eagle3_arm_plans(drafters, experiment_concurrency, control_concurrency,
                                    served=arm_capture.served_capture(P))  # labels from the release's trace
eagle3_models = plans[0].models(models)  # the relaunch chain serves the headline drafter, so its server is reused
show.table({"profile": P.name, "target": models.target, "draft": eagle3_models.draft, "patch": patch,
            "CPU harness shims": ", ".join(shims) or "none"})

# %% [markdown]
# The EAGLE-3 arms: the headline drafter over the whole sweep, and the experiments around it (fewer points).

# %%
show.table([plan.to_dict() for plan in plans])

# %% [markdown]
# ## What notebook 02 says the patch must delegate

# %%
trace = capture_trace.load_trace(P.name)
verdict = trace.verdict
show.table({"missing members": ", ".join(verdict.missing_members),
            "delegation gaps": ", ".join(verdict.delegation_gaps),
            "one method enough?": verdict.one_method_enough})

# %% [markdown]
# ## The patches
# Unified diffs against the sglang 0.5.9 package layout. The full fix must delegate exactly the members the trace
# found missing (checked here from the patch's own source); the one-method patch is the engineer's first attempt.

# %%
show.table(patchbench.patch_table([relaunch.ONE_METHOD_PATCH, patch]))

# %%
delegated = patchbench.expect_patch_covers_trace(patch, verdict.missing_members)
print("the full patch delegates:", ", ".join(delegated))

# %% [markdown]
# ## Capture check: does the inner model capture what the drafter reads?
# sglang's own `ModelRunner`, built the way `sglang.bench_one_batch` builds it, with the EAGLE-3 server
# arguments; unpatched, then patched, with real prefill and decode forwards (`cpu` profile).

# %%
captures = {}
if capture and P.device == "cpu":
    captures = {None: capture_check.run_cpu_capture_check(None, num_layers=P.model_num_layers),
                patch.removesuffix(".patch"): capture_check.run_cpu_capture_check(patch, num_layers=P.model_num_layers)}
show.table(patchbench.capture_rows(captures)) if captures else "capture check skipped"

# %%
if captures:
    patchbench.expect_capture(captures, verdict.first_raise["cpu"].member)

# %%
agreement = capture_trace.compare_with_trace(trace, captures, profile="cpu" if P.device == "cpu" else "gpu",
                                             full_patch=patch) if captures else []
show.table([row.to_dict() for row in agreement]) if agreement else "no capture results to compare"

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
cycle_trace = patchbench.start_cycle_trace(P, bench_dir, bench)
print("cycle trace:", cycle_trace)

# %%
chain = relaunch.run_chain(P, eagle3_models, logs_dir, shims,
                           steps=[relaunch.ChainStep("unpatched"),
                                  relaunch.ChainStep("one-method patch", (relaunch.ONE_METHOD_PATCH,)),
                                  relaunch.ChainStep("full delegation patch", (patch,))], progress=print,
                           keep_last_serving=bench)
show.table([step.row() for step in chain])

# %% [markdown]
# This cell fails the notebook if a wrapper error survives the full patch, or if the patched server does not
# answer `/generate` with speculative decoding, unless it stops at a setting that is still GPU-only (on CPU:
# topk > 1, which the harness refuses in one line).

# %%
try:
    story = relaunch.expect_chain(chain, P, verdict.missing_members)
except BaseException:
    relaunch.stop_serving(chain)
    raise
print("\n".join(story))

# %% [markdown]
# ## Benchmark: baseline vs EAGLE-3
# Same prompts, same sweep. Per request: TTFT, inter-token latency (per token: a chunk of k tokens spreads its gap
# over k tokens, as `bench_serving` does; the per-chunk gap is kept apart), end-to-end latency, completion tokens
# and acceptance from the server's own counts, and the generated ids. Every finished request is on disk (JSONL)
# at once. The EAGLE-3 arm is measured on the chain's full-patch server; the experiment arms get their own.

# %%
config = patchbench.sweep_config(P, models, prompt_kind)
show.table(config.to_dict())

# %% [markdown]
# What the CPU harness changes on these servers against a GPU host, read off their launch environments (obstacle
# numbers of `runtime/cpu_harness`): what both servers share beside what only the EAGLE-3 server pays.

# %%
harness = patchbench.harness_rows(P, models, eagle3_models, shims, CONTROL_SHIMS if P.cpu_harness else ())
show.table(harness) if harness else "not the CPU harness: nothing changed"

# %% [markdown]
# The sidecar is written after each arm (`complete` false until the last cell), so a failure after the benchmark
# keeps every arm already measured.

# %%
partial = patchbench.PartialSidecar(sidecars.PatchBenchSidecar(
    profile=P.name, parameters={**params.values, "prompt_kind": prompt_kind}, profile_values=P.model_dump(),
    models=vars(eagle3_models),
    environment=envinfo.environment_table(), patch=patch, delegated_members=delegated,
    chain=[step.record() for step in chain], story=story, spec_arms=[plan.to_dict() for plan in plans],
    capture={str(key): result.to_dict() for key, result in captures.items()},
    agreement=[row.to_dict() for row in agreement], harness=harness))

# %%
if bench:
    eagle3 = partial.add_arm(patchbench.measure_chain_server(chain, plans[0], config, bench_dir,
                                                             relaunch.not_runnable_reason(chain)))
    baseline, crosscheck = patchbench.run_server_arm(
        "baseline", P, models, config, bench_dir, logs_dir, kind=ARM_KIND_BASELINE, speculative=False,
        shims=CONTROL_SHIMS if P.cpu_harness else (), with_cross_check=cross_check_with_bench_serving)
    partial.add_arm(baseline, crosscheck)
    experiments = [partial.add_arm(patchbench.run_experiment_arm(plan, P, models, config, bench_dir, logs_dir,
                                                                 patch, shims))
                   for plan in plans[1:]] if eagle3.measured_points() else []
    report = BenchReport.create(P.name, [baseline, eagle3, *experiments], crosscheck.to_dict() if crosscheck else None,
                                copy_bandwidth=host.copy_bandwidth())  # the cost model's CPU calibration reads it
    show.table(point_rows(report.arms))
    patchbench.save_complete_report(report, bench_dir)  # fails the notebook if an arm stalled or died

# %% [markdown]
# ### Launch to launch: the headline pair relaunched
# The same two servers launched again (`bench_launch_repeats` more times; the profile's default for `cpu` is 1),
# each swept at concurrency 1 in mirrored order, so that a slow spell of a shared machine falls on both arms. Every
# pair's speedup, and its plain step and cycle from the harness timers of those launches: one launch's speedup is
# one draw when the pairs disagree.

# %%
relaunched = patchbench.relaunched_spread(
    plans[0], P, models, config, bench_dir, logs_dir, patch, shims, CONTROL_SHIMS if P.cpu_harness else (),
    baseline, eagle3, cycle_trace,
    variants=patchbench.layer_mismatch_plans(plans) if interleave_layer_mismatch else ()
) if bench and eagle3.measured_points() else patchbench.Relaunched(None, [])
spread = relaunched.spread
partial.update(launch_spread=spread.model_dump() if spread else None,
               interleaved_sweep=[s.model_dump() for s in relaunched.interleaved],
               interleaved_variants=[s.model_dump() for s in relaunched.variants],
               variant_costs=[c.model_dump() for c in relaunched.variant_costs])
show.table(launch_spread.rows(spread)) if spread else "not relaunched (bench_launch_repeats is 0, or no EAGLE-3 point)"

# %%
print(launch_spread.verdict(spread)) if spread else None

# %% [markdown]
# The interleaved launch measured every concurrency of `bench_interleave_concurrency` in each round, so each point
# has both arms in the same spells of the machine: the pooled rates (client-seen and decode-only) and the speedup's
# bootstrap interval over the rounds. The cost model's run check below is scored on these too.

# %%
show.table(launch_spread.point_rows(relaunched.interleaved)) if relaunched.interleaved else "no interleaved launch"

# %% [markdown]
# ### One EAGLE-3 cycle by component, against one plain decode step
# Mean exclusive milliseconds per plain step (baseline server) and per cycle (EAGLE-3 server) at batch size 1,
# measured by the timers in the servers above. "Harness only" marks the GPU kernels this CPU runs as torch ports:
# on a GPU each is one kernel launch. The cycle in plain steps is the break-even tokens per request per cycle.

# %%
cycle_table = patchbench.cycle_components(P, cycle_trace, baseline, eagle3, shims, experiments) if bench else None
show.table(cycle.table_rows(cycle_table)) if cycle_table else "no cycle trace (not the CPU harness, or no arm measured)"

# %%
cycle_figure = draw_cycle_figure(cycle_table) if cycle_table else None
show.images([cycle_figure]) if cycle_figure else "no cycle figure"

# %% [markdown]
# ### Where each point's time went: decode batches, prefill batches, the rest
# The same timers, lined up with each point's measured window (wall clock): the scheduler's decode batches (plain
# steps or cycles), its prefill batches (each new request's prompt; with EAGLE-3 the drafter's extend too), and the
# rest of the window (idle, requests in and out), in milliseconds per decode batch. The bench's decode-only rate
# pays all three; a decode cost model counts only the first.

# %%
show.table(server_time.rows(cycle_table.by_point)) if cycle_table and cycle_table.by_point else "no point windows in the trace"

# %%
server_time_figure = draw_server_time_figure(cycle_table) if cycle_table else None
show.images([server_time_figure]) if server_time_figure else "no server-time figure"

# %% [markdown]
# ### Lossless: speculative output must equal the baseline's greedy output, token for token
# Every prompt, every speculative arm, against the baseline at the same concurrency. Concurrency 1 is required
# (one request per batch in both arms); other levels are shown. A profile that runs fp32 fails the notebook on any
# difference; a bf16 profile records per prompt where the outputs part and fails only below its
# `lossless_min_agreement` (verify and decode do not give bit-identical bf16 logits; see `bench/lossless.py`).

# %%
lossless_result = patchbench.lossless_check(report.arms, bench_dir, P) if bench and eagle3.measured_points() else None
partial.update(lossless=lossless_result.to_dict()) if lossless_result else None
show.table(lossless_result.rows()) if lossless_result else "no speculative arm measured"

# %%
if lossless_result:
    lossless.expect_lossless(lossless_result)
print("lossless:", lossless_result.lossless if lossless_result else None,
      "| passed:", lossless_result.passed if lossless_result else None)

# %% [markdown]
# ### Acceptance, three ways
# Ours (completion tokens / verify steps), the server's per-request `spec_accept_length` (must agree exactly), and
# the server's lifetime `avg_spec_accept_length` after the flush before each point (tokens per verify step without
# the prefill token, refreshed every 40 steps), next to the same quantity rebuilt from the per-request histograms.

# %%
acceptance_records = acceptance.acceptance_records(report.arms) if bench else []
show.table(acceptance.acceptance_table(acceptance_records)) if acceptance_records else "no speculative arm measured"

# %%
if acceptance_records:
    acceptance.expect_acceptance_consistent(report.arms)

# %% [markdown]
# Served at concurrency 1 next to the drafter's own offline simulation of sglang's greedy verify on the same
# prompts (transformers, recorded when it was trained): the harness's draft, verify and draft-extend attention have
# to reproduce what the drafter was trained and scored on.

# %%
offline = acceptance.offline_vs_served(report.arms, drafters.offline_acceptance) if bench else []
show.table(offline) if offline else "the drafter records no offline simulation"

# %% [markdown]
# ### The layer-mismatch experiment, measured
# The trained drafter served twice on the same prompts: with the aux layer ids it was trained on, and with each id
# one layer early, which is what sglang 0.5.9's CUDA-graph capture hands it while eager forwards hand it the
# trained ones. The tiny target's magnitude does not transfer to Kimi-K2.5's 61 layers; the mechanism is the same.

# %%
mismatch = acceptance.layer_mismatch(report.arms, P.model_num_layers,
                                     {plan.name: plan.aux_layer_ids for plan in plans}) if bench else None
show.table(mismatch.rows()) if mismatch else "the layer-mismatch arm was not measured"

# %% [markdown]
# What the shift costs in throughput: the layer-mismatch arm measured in the interleaved launch's rounds, on the
# same prompts as the headline EAGLE-3 arm and in the same spells of the machine (its rate over the headline
# arm's, with the bootstrap interval over the rounds).

# %%
show.table(launch_spread.variant_rows(relaunched.variant_costs)) if relaunched.variant_costs else \
    "the layer-mismatch arm did not join an interleaved launch"

# %% [markdown]
# ### Speedup, measured here

# %%
speedup = acceptance.speedup_records(report.arms) if bench else []
show.table(speedup) if speedup else "no EAGLE-3 point to compare"

# %% [markdown]
# ### Sampling
# On CPU, sglang 0.5.9 verifies greedily even at temperature > 0 (only a log warning). The speculative CPU servers
# refuse non-greedy sampling with one line instead (and the benchmark refuses such a workload before it starts).

# %%
sampling = sidecars.SamplingRecord(policy="refused", reason=patchbench.GREEDY_ONLY) if P.cpu_harness else None
show.table(sampling.model_dump()) if sampling else "not a CPU run"

# %% [markdown]
# ### A second latent defect: `verify_tree_greedy_func` has no CPU branch
# Read from the installed sglang's syntax tree: the device dispatch ends without an `else`, so on a CPU the function
# returns its buffers untouched, and its caller allocated them with `torch.empty`.

# %%
dispatch_gap = silent_noop.find_dispatch_gap(open_source())
print("\n".join(dispatch_gap.evidence()))

# %% [markdown]
# ### Cross-check with sglang's own `bench_serving` (same server, same workload)

# %%
show.table(patchbench.cross_check_row(crosscheck)) if bench and crosscheck else "cross-check not run"

# %% [markdown]
# ### Figures (measured points only, labelled with profile and date)

# %%
figures = draw_bench_figures(report) if bench else {}
show.images(figures.values())

# %% [markdown]
# ## Why no speedup? Diagnostics on this run's evidence

# %%
findings = patchbench.diagnose_run(P, report if bench else None, bench_dir, logs_dir, drafters.offline_acceptance,
                                   cycle_table, spread)
show.table(findings)

# %% [markdown]
# ## Why no speedup? The decode cost model for the incident's deployment
# Modelled, not measured: 8x RTX PRO 6000 Blackwell over PCIe, TP 8, Kimi-K2.5 INT4, overhead calibrated on the
# engineer's reported 63.6 tok/s. Reported figures are drawn hollow; this run's measured points appear only on
# the figures of the deployment they were measured on.

# %%
prediction = incident_report()
show.table([{"quantity": key, **values} for key, values in prediction["side_by_side"].items()])

# %%
show.table(prediction["break_even_accept_length"], ["break-even acceptance length"])

# %%
show.images(model_figures(P.name, params.profile_overrides))

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
show.table(model_validation.sweeps) if model_validation.sweeps else "no draft-step sweep in the validation data"

# %% [markdown]
# Source by source: split, MAPE beside the naive baselines, largest error, and whether the source capped running
# requests.

# %%
show.table(model_validation.sources)

# %%
show.images([model_plots.validation_figure()])

# %% [markdown]
# Series by series and point by point: published against predicted, and whether each point was fitted.

# %%
validation = perfmodel.validate()
show.table(perfmodel.trend_table(validation))

# %%
show.table(perfmodel.validation_points(validation))

# %% [markdown]
# MAPE per source under other assumed decode contexts: how much the result rests on that one assumption.

# %%
show.table(model_validation.context)

# %%
sidecars.write(sidecars.PatchBenchSidecar(
    profile=P.name, parameters={**params.values, "prompt_kind": prompt_kind}, profile_values=P.model_dump(),
    models=vars(eagle3_models),
    environment=envinfo.environment_table(), patch=patch, delegated_members=delegated,
    chain=[step.record() for step in chain], story=story,
    capture={str(key): result.to_dict() for key, result in captures.items()},
    agreement=[row.to_dict() for row in agreement], harness=harness,
    bench_report=str(bench_dir / "bench_report.json") if bench else None,
    arms=point_rows(report.arms) if bench else [],
    cross_check=crosscheck.to_dict() if bench and crosscheck else None,
    figures={**{kind: str(path) for kind, path in figures.items()},
             **({"cycle_components": str(cycle_figure)} if cycle_figure else {}),
             **({"server_time": str(server_time_figure)} if server_time_figure else {})},
    diagnostics=findings,
    spec_arms=[plan.to_dict() for plan in plans],
    lossless=lossless_result.to_dict() if lossless_result else None,
    acceptance=acceptance_records,
    offline_vs_served=offline,
    layer_mismatch=mismatch.to_dict() if mismatch else None,
    speedup=speedup,
    sampling=sampling,
    verify_dispatch_gap=dispatch_gap.to_dict(),
    timings=patchbench.timings(chain, captures, report if bench else None),
    cycle_components=cycle_table,
    launch_spread=spread,
    interleaved_sweep=relaunched.interleaved,
    interleaved_variants=relaunched.variants,
    variant_costs=relaunched.variant_costs,
))
