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
# model objects, which of them the Kimi-K2.5 wrapper lacks, which other wrappers share the gap, and since when.

# %%
from IPython.display import Image, display

from eagle3lab.trace import audit, sources, tracebook
from eagle3lab.runtime import envinfo
from eagle3lab import nbparams, show, sidecars

nbparams.begin(globals())

# %% tags=["parameters"]
profile: str = "cpu"  # parameter profile (params/<profile>.yaml); the trace covers both profiles' start-up paths
overrides: dict = {}  # profile keys to override (accepted for a uniform run command; the trace reads none)
sglang_source: str = "installed"  # "installed" or a release version such as "0.5.9"
entry_class: str = "KimiK25ForConditionalGeneration"  # entry model class to audit
bisect_versions: list = []  # releases to bisect (empty: every release from 0.5.6 to the newest)
model_depth: int = 61  # decoder layers of the real target (Kimi-K2.5)
aux_layer_ids: list = [2, 30, 58]  # drafter eagle_aux_hidden_state_layer_ids (AQ-MedAI/Kimi-K25-eagle3)
tiny_model_depth: int = 4  # decoder layers of the tiny cpu-profile target
tiny_aux_layer_ids: list = [0, 1, 2]  # drafter layer ids of the tiny cpu-profile drafter

# %%
params = nbparams.resolve(globals())  # a mistyped or unknown parameter stops here with one line
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
# The hook's own source runs on a stand-in `self`; rank None means the profile never reaches that call.

# %%
layer_ids = tracebook.layer_ids(src, entry_class, model_depth, aux_layer_ids, tiny_model_depth, tiny_aux_layer_ids)
print(tracebook.layer_text(layer_ids))

# %%
show.table(tracebook.layer_rows(layer_ids), ["profile", "startup_rank", "certain", "where", "args", "result", "uses"])

# %% [markdown]
# ## 5. Conformance audit over every registered entry class (this release)

# %%
conf_here = audit.conformance(src)
print(f"{conf_here['entry_classes']} entry classes; {len(conf_here['rows'])} wrap an EAGLE-3-capable inner model "
      f"(audited in {conf_here['seconds']} s); {len(conf_here['wrappers_of_non_eagle3_models'])} wrap other models")
show.table(conf_here["rows"], ["entry", "file", "inner", "missing"])

# %% [markdown]
# ## 6. Release bisect (cached wheels; releases audited in parallel)

# %%
versions = tracebook.bisect_versions(bisect_versions)
bisect = audit.bisect(versions, entry_class)
print(f"appeared {bisect['appeared']}, first fixed {bisect['first_fixed']}, gained {bisect['member_gained']}; "
      f"{len(versions)} releases in {bisect['seconds']} s")
show.table(bisect["rows"], ["version", "present", "file", "status", "missing", "fixed"])

# %% [markdown]
# ## 7. The newest release: wrappers still missing members

# %%
conf_newest = audit.conformance(sources.open_source(versions[-1]))
print(f"sglang {conf_newest['sglang_version']}: contract members {conf_newest['members']}")
show.table([row for row in conf_newest["rows"] if row["missing"]], ["entry", "file", "inner", "missing"])

# %%
figure_paths = tracebook.figures(conf_here, conf_newest, bisect)
for path in figure_paths:
    display(Image(filename=str(path)))

# %%
sidecar_file = sidecars.write(sidecars.InterfaceTraceSidecar(
    profile=params.profile.name,
    parameters={"sglang_source": sglang_source, "entry_class": entry_class, "bisect_versions": versions,
                "model_depth": model_depth, "aux_layer_ids": aux_layer_ids,
                "tiny_model_depth": tiny_model_depth, "tiny_aux_layer_ids": tiny_aux_layer_ids},
    source=source_info,
    environment=envinfo.environment_table(),
    grep=grep_hits,
    contract=contract_sites,
    verdict=verdict,
    draft=draft,
    layer_ids=layer_ids,
    conformance={"traced": conf_here, "newest": conf_newest},
    bisect=bisect,
    timings={"verdict_seconds": verdict_seconds, "audit_seconds_one_release": conf_here["seconds"],
             "bisect_seconds_warm_cache": bisect["seconds"], "bisect_releases": len(versions)},
    figures=[p.name for p in figure_paths],
))
print(sidecar_file)
