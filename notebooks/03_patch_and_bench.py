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
from eagle3lab.fix import capture_check, relaunch
from eagle3lab.runtime import deployment, envinfo
from eagle3lab import nbparams, show, sidecars
from eagle3lab.bench import arms as patchbench
from eagle3lab.bench.sweep import BenchReport, point_rows
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
from eagle3lab.paths import repo_dir
from eagle3lab.report.presets import incident_report
from eagle3lab.report.plots.bench import draw_bench_figures
from eagle3lab.report.build import model_figures

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile: params/<profile>.yaml (cpu or blackwell-8x)
overrides: dict = {}  # profile keys to override, e.g. {"bench_concurrency": [1, 2]}; keys may also be passed directly
patch: str = "kimi_k25-eagle3-delegation"  # the fix: a name in patches/ or a path; the one-method patch is always shown too
prompt_kind: str = "ids"  # benchmark prompts: "ids" (token ids) or "text"
capture: bool = True  # run the in-process capture check (cpu profile only)
bench: bool = True  # run the benchmark arms
cross_check_with_bench_serving: bool = True  # also run sglang.bench_serving on the baseline server

# %%
params = nbparams.resolve(globals())
P = params.profile
logs_dir = repo_dir("artifacts") / "logs"
bench_dir = repo_dir("artifacts") / f"03_bench.{P.name}"
models = deployment.resolve_models(P)
shims = SPEC_SHIMS if P.cpu_harness else ()
show.table({"profile": P.name, "target": models.target, "draft": models.draft, "patch": patch,
            "CPU harness shims": ", ".join(shims) or "none"})

# %% [markdown]
# ## What notebook 02 says the patch must delegate

# %%
trace = capture_check.load_trace(P.name)
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
# ## Relaunch chain
# unpatched -> one-method patch -> full patch, each a real launch with EAGLE-3 on the installed package (patched
# for that launch only). The outcome of each step is read from the server log, not assumed.

# %%
chain = relaunch.run_chain(P, models, logs_dir, shims,
                           steps=[relaunch.ChainStep("unpatched"),
                                  relaunch.ChainStep("one-method patch", (relaunch.ONE_METHOD_PATCH,)),
                                  relaunch.ChainStep("full delegation patch", (patch,))], progress=print)
show.table([step.row() for step in chain])

# %% [markdown]
# This cell fails the notebook if a wrapper error survives the full patch, or, on `cpu`, if the known CPU
# limitation of speculative decoding ever goes away (the EAGLE-3 arm could then be measured here).

# %%
story = relaunch.expect_chain(chain, P, verdict.missing_members)
print("\n".join(story))

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
agreement = capture_check.compare_with_trace(trace, captures, profile="cpu" if P.device == "cpu" else "gpu",
                                             full_patch=patch) if captures else []
show.table([row.to_dict() for row in agreement]) if agreement else "no capture results to compare"

# %% [markdown]
# ## Benchmark: baseline vs EAGLE-3
# Same prompts, same sweep. Per request: TTFT, inter-token latency, end-to-end latency, completion tokens from the
# server's own counts, acceptance from `meta_info`. Every finished request is on disk (JSONL) at once.

# %%
config = patchbench.sweep_config(P, models, prompt_kind)
show.table(config.to_dict())

# %%
if bench:
    baseline, crosscheck = patchbench.run_server_arm(
        "baseline", P, models, config, bench_dir, logs_dir, speculative=False,
        shims=CONTROL_SHIMS if P.cpu_harness else (), with_cross_check=cross_check_with_bench_serving)
    eagle3 = patchbench.eagle3_arm(P, models, config, bench_dir, logs_dir,
                                   relaunch.not_runnable_reason(chain), patch)
    report = BenchReport.create(P.name, [baseline, eagle3], crosscheck.__dict__ if crosscheck else None)
    report.save(bench_dir / "bench_report.json")
    show.table(point_rows(report.arms))

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
findings = patchbench.diagnose_run(P, report if bench else None, bench_dir, logs_dir)
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
show.images(model_figures(P.name))

# %%
sidecars.write(sidecars.PatchBenchSidecar(
    profile=P.name, parameters=params.values, profile_values=P.model_dump(), models=vars(models),
    environment=envinfo.environment_table(), patch=patch, delegated_members=delegated,
    chain=[step.record() for step in chain], story=story,
    capture={str(key): result.to_dict() for key, result in captures.items()},
    agreement=[row.to_dict() for row in agreement],
    bench_report=str(bench_dir / "bench_report.json") if bench else None,
    arms=point_rows(report.arms) if bench else [],
    cross_check=crosscheck.to_dict() if bench and crosscheck else None,
    figures={kind: str(path) for kind, path in figures.items()},
    diagnostics=findings,
))
