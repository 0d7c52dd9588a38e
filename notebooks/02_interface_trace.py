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
# # 02 - The EAGLE-3 interface the runtime really uses
# The engineer grepped the runner for `eagle3|aux_hidden|capture_aux` and concluded one delegating method was
# enough. Here sglang's own source answers, by AST: which members the runtime needs from the target and draft
# model objects, which of them the Kimi-K2.5 wrapper lacks, which other wrappers share the gap, since when, and
# a checked delegation fix for every wrapper that still lacks it.

# %%
from eagle3lab.notebook import fixes as fixbook
from eagle3lab.fix import fixverify
from eagle3lab.trace import audit
from eagle3lab.notebook import interface_trace as tracebook
from eagle3lab.runtime import envinfo
from eagle3lab.notebook import params as nbparams, show
from eagle3lab import sidecars

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile (params/<profile>.yaml); the trace covers both profiles' start-up paths
overrides: dict = {}  # profile keys to override; the trace reads the profile's drafter config for layer ids
sglang_source: str = "installed"  # "installed" or a release version such as "0.5.9"
entry_class: str = "KimiK25ForConditionalGeneration"  # entry model class to audit
bisect_versions: list = []  # releases to bisect (empty: every release from 0.5.6 to the newest)
verify_fixes: bool = True  # run the generated fixes' import and ModelRunner capture checks (minutes on CPU)

# %%
params = nbparams.resolve(globals())  # a mistyped or unknown parameter stops here with one line
P = params.profile
src, source_info = tracebook.release_source(sglang_source)
show.table(source_info)

# %% [markdown]
# ## 1. The grep view (the engineer's method)
# Flags, comments and calls look alike here, and only one of the members the runtime needs matches the pattern.

# %%
grep_hits = tracebook.grep_table(src)
show.table(grep_hits)

# %% [markdown]
# ## 2. The contract: every access to the target or draft model object on an EAGLE-3 server

# %%
contract_sites = tracebook.contract_table(src)
show.table(contract_sites, ["where", "function", "role", "access", "member", "guard", "args", "runs_when"])

# %% [markdown]
# ## 3. Class resolution and the verdict for the entry class

# %%
verdict, verdict_seconds = tracebook.timed(audit.verdict, src, entry_class)
print(tracebook.verdict_text(verdict))

# %%
show.table(list(verdict["class_report"]["members"].values()), ["member", "status", "via", "inner_has", "gap"])

# %% [markdown]
# ### The drafter's side: members the EAGLE workers use on the draft model

# %%
draft = audit.draft_report(src)
show.table(list(draft["class_report"]["members"].values()), ["member", "status", "via"])

# %% [markdown]
# ## 4. Layer ids captured by each `set_eagle3_layers_to_capture` call, in start-up order
# The target's depth and the drafter's `eagle_aux_hidden_state_layer_ids` are read from the models' own
# config.json files, as sglang reads them: the GPU deployment's (its hub snapshot; "not fetched" until
# `python -m eagle3lab fetch-models --profile blackwell-8x --configs-only` has run) and the CPU profile's. A drafter
# that names no ids gets sglang's defaults everywhere.

# %%
layer_setups = tracebook.layer_setups(P)
show.table([setup.row() for setup in layer_setups])

# %% [markdown]
# The hook's own source runs on a stand-in `self`; rank None means the profile never reaches that call.

# %%
layer_ids = tracebook.layer_ids(src, entry_class, layer_setups)
print(tracebook.layer_text(layer_ids))

# %%
show.table(tracebook.layer_rows(layer_ids),
           ["profile", "deployment", "depth", "drafter ids", "startup_rank", "certain", "where", "args", "result", "uses"])

# %% [markdown]
# ## 5. Conformance audit over every registered entry class (this release)
# Every `EntryClass` registration gets a row: a wrapper of an EAGLE-3-capable model (inner model resolved through
# constructors, helper methods, several options, proxies and bases elsewhere), a wrapper of a model without
# EAGLE-3, a plain model, a draft head, or unresolved with the reason. The counts add up to the registrations.

# %%
conf_here = audit.conformance(src)
print(tracebook.audit_summary(conf_here))
show.table(tracebook.count_rows(conf_here))

# %%
show.table(tracebook.lacking_rows(conf_here))

# %%
show.table(conf_here["unresolved"], ["entry", "file", "kind", "reason"])

# %% [markdown]
# ## 6. Release bisect
# Every release's row depends only on the release and this project's trace code, so the rows this code traced are
# shipped as a release record (`trace/data/release_rows.json`, with when they were traced); a release it does not
# hold (a newer one, or after a change to the trace code) is fetched and traced here, in parallel.

# %%
releases = tracebook.bisect_releases(bisect_versions, entry_class)  # offline: the releases the record holds
versions = releases.versions
print(f"releases bisected: {releases.origin}")
bisect = audit.bisect(versions, entry_class)
print(f"appeared {bisect['appeared']}, first fixed {bisect['first_fixed']}, gained {bisect['member_gained']}; "
      f"{len(versions)} releases in {bisect['seconds']} s ({len(bisect['from_record'])} from the release record, "
      f"{len(bisect['traced_now'])} traced now)")
show.table(bisect["rows"], ["version", "present", "file", "status", "missing", "fixed"])

# %% [markdown]
# ## 7. The newest release: the same audit
# Its wheel comes from the cache, else the package index; with neither (an air-gapped node) this section, its
# capture-order rows and its fixes are skipped, and one line says so.

# %%
newest_src, newest_skipped = tracebook.open_newest(versions)
conf_newest = audit.conformance(newest_src) if newest_src else None
print(tracebook.newest_text(conf_newest, newest_skipped))
show.table(tracebook.count_rows(conf_newest) if conf_newest else [])

# %%
show.table(tracebook.lacking_rows(conf_newest) if conf_newest else [])

# %%
show.table((conf_newest or {}).get("unresolved", []), ["entry", "file", "kind", "reason"])

# %% [markdown]
# ## 7b. The second EAGLE-3 defect: CUDA graphs captured before the drafter's layer ids are set
# Read from each release's syntax tree: a graph runner that calls `set_eagle3_layers_to_capture()` with no ids
# before it captures records the model's default layers; the runner sets the drafter's ids only after
# `init_device_graphs()`, for eager forwards, through the model's own hook (0.5.9 adds 1 to every id; from 0.5.13
# only when the first id is 1, sglang PR #25454). Shown for this release and the newest with the Kimi drafter's ids
# (as the engineer's write-up quotes the AQ-MedAI/Kimi-K25-eagle3 config) on 61 layers, and for each profile's
# own drafter; the first release with the order fixed is bisected. Upstream fix: sglang PR #22836.

# %%
capture_order = tracebook.capture_order_record(src, newest_src, versions, layer_setups)
print(tracebook.capture_order_text(capture_order))

# %%
show.table(tracebook.capture_order_rows(capture_order))

# %% [markdown]
# Every release from this one on, the layers each path captures (a capture index `c` is the input of layer `c`,
# the output of layer `c - 1`), runs of releases that capture alike merged, from the release record shipped in the
# package.

# %%
show.table(tracebook.release_table_rows(capture_order))

# %% [markdown]
# ## 8. Generated fixes for every lacking wrapper, and their checks
# One Kimi-shaped delegation patch per class that assigns a lacking wrapper's inner model (`patches/upstream/<release>/`,
# regenerate with `python -m eagle3lab upstream-fixes --sglang VERSION --write`). Each is applied with exact context
# to its release, compiled, checked to forward every argument behind a guard, and the release is audited again with
# it; a wrapper whose `forward` post-processes the inner output is refused, with the reason.

# %%
fix_results = {release.version: fixbook.fixes(release, conf)
               for release, conf in ((src, conf_here), (newest_src, conf_newest)) if release and conf}
show.table([row for result in fix_results.values() for row in fixbook.fix_rows(result)])

# %%
show.table([{"release": v, **r["series"]} for v, r in fix_results.items()],
           ["release", "ok", "detail", "still_lacking"])

# %% [markdown]
# ### Run-time verification: the patched modules import, and the hook reaches the inner model
# Import check for every release (the newest one unpacked next to this environment's torch and transformers).
# Capture check on the installed release, through sglang's own `ModelRunner` on CPU with tiny configs: unpatched
# the launch must die on the missing hook, patched a real prefill and decode must return the aux hidden states of
# the layers the drafter names.

# %%
verification = fixbook.verify(fix_results, run=verify_fixes)
show.table(fixbook.import_rows(verification))

# %%
show.table(fixverify.capture_rows(verification["capture"]))

# %%
figure_paths = tracebook.figures(conf_here, conf_newest, bisect)
show.images(figure_paths)

# %%
sidecar_file = sidecars.write(sidecars.InterfaceTraceSidecar(
    profile=P.name,
    parameters={"sglang_source": sglang_source, "entry_class": entry_class, "bisect_versions": versions,
                "verify_fixes": verify_fixes},
    layer_setups=[setup.to_dict() for setup in layer_setups],
    source=source_info,
    environment=envinfo.environment_table(),
    grep=grep_hits,
    contract=contract_sites,
    verdict=verdict,
    draft=draft,
    layer_ids=layer_ids,
    conformance={"traced": conf_here, **({"newest": conf_newest} if conf_newest else {})},
    fixes=fixbook.stored(fix_results, verification),
    bisect=bisect,
    capture_order=capture_order,
    timings={"verdict_seconds": verdict_seconds, "audit_seconds_one_release": conf_here["seconds"],
             "bisect_seconds_warm_cache": bisect["seconds"], "bisect_releases": len(versions)},
    figures=[p.name for p in figure_paths],
))
print(sidecar_file)
