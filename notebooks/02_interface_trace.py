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

from eagle3lab import audit, nbparams, sources, tracebook

nbparams.begin(globals())

# %% tags=["parameters"]
sglang_source: str = "installed"  # "installed" or a release version such as "0.5.9"
entry_class: str = "KimiK25ForConditionalGeneration"  # entry model class to audit
bisect_versions: list = []  # releases to bisect (empty: every release from 0.5.6 to the newest)
model_depth: int = 61  # decoder layers of the real target (Kimi-K2.5)
aux_layer_ids: list = [2, 30, 58]  # drafter eagle_aux_hidden_state_layer_ids (AQ-MedAI/Kimi-K25-eagle3)
tiny_model_depth: int = 4  # decoder layers of the tiny cpu-profile target
tiny_aux_layer_ids: list = [0, 1, 2]  # drafter layer ids of the tiny cpu-profile drafter

# %%
nbparams.resolve(globals())  # a mistyped or unknown parameter stops here with one line
src, source_info = tracebook.release_source(sglang_source)
print(f"sglang {src.version} from {src.origin}: {source_info['python_files']} Python files, {len(src.skipped)} skipped")
print(source_info.get("note", "unmodified release source"))

# %% [markdown]
# ## 1. The grep view (the engineer's method)
# Flags, comments and calls look alike here, and only one of the members the runtime needs matches the pattern.

# %%
grep_hits = tracebook.grep_table(src)
print(f"{len(grep_hits)} matching lines")
for hit in grep_hits:
    print(f"{hit['file']}:{hit['line']}: {hit['text']}")

# %% [markdown]
# ## 2. The contract: every access to the target or draft model object on an EAGLE-3 server

# %%
contract_sites = tracebook.contract_table(src)
for s in contract_sites:
    guard = s["guard"] or "UNGUARDED"
    print(f"{s['where']:<58} {s['role']:<6} {s['access']:<5} {s['member']:<30} {guard:<15} {s['runs_when']}")

# %% [markdown]
# ## 3. Class resolution and the verdict for the entry class

# %%
verdict, verdict_seconds = tracebook.timed(audit.verdict, src, entry_class)
report = verdict["class_report"]
print(f"{entry_class}: resolution order {report['resolution_order']}")
print(f"inner model: self.{report['inner_attr']} = {report['inner_class']}; "
      f"nn.Module.__getattr__: {report['nn_module_getattr']}; custom __getattr__: {report['custom_getattr']}")
for member, st in report["members"].items():
    print(f"  {member:<32} {st['status']:<10} {st['via']:<40} {st['gap']}")
print("needed unguarded but missing:", verdict["missing_members"], "| delegation gaps:", verdict["delegation_gaps"])
for profile, site in verdict["first_raise"].items():
    args = ", ".join(site.get("args", []))
    print(f"first raise, {profile} profile: {site.get('where')} {site.get('member')}({args})")
    if site.get("otherwise"):
        other = site["otherwise"]
        print(f"  (behind a branch this profile cannot decide; if skipped: {other['where']} {other['member']})")
for profile, site in verdict["next_raise_after_one_method"].items():
    print(f"with only that method delegated, {profile} profile raises next at {site.get('where')} {site.get('member')}")
print("Is one delegating method enough?", verdict["one_method_enough"])

# %% [markdown]
# ## 4. Layer ids captured by each `set_eagle3_layers_to_capture` call, in start-up order
# The hook's own source runs on a stand-in `self`; rank None means the profile never reaches that call.

# %%
layer_ids = tracebook.layer_ids(src, entry_class, model_depth, aux_layer_ids, tiny_model_depth, tiny_aux_layer_ids)
for table in layer_ids:
    print(f"profile {table['profile']}, depth {table['depth']}, drafter ids {table['aux_layer_ids']}, "
          f"sites disagree: {table['conflict']}")
    for row in table["rows"]:
        print(f"  rank {row['startup_rank']}: {row['where']:<46} args={row['args']} -> {row['result']} "
              f"[{row['uses']}]")
    print(f"  eager forwards capture {table['eager_forwards_capture']}; "
          f"CUDA-graph forwards capture {table['cuda_graph_forwards_capture']}")

# %% [markdown]
# ## 5. Conformance audit over every registered entry class (this release)

# %%
conf_here = audit.conformance(src)
print(f"{conf_here['entry_classes']} entry classes; {len(conf_here['rows'])} wrap an EAGLE-3-capable inner model "
      f"(audited in {conf_here['seconds']} s); {len(conf_here['wrappers_of_non_eagle3_models'])} wrap other models")
for row in conf_here["rows"]:
    print(f"  {row['entry']:<40} inner {row['inner']:<58} missing {row['missing']}")

# %% [markdown]
# ## 6. Release bisect (cached wheels; releases audited in parallel)

# %%
versions = tracebook.bisect_versions(bisect_versions)
bisect = audit.bisect(versions, entry_class)
print(f"appeared {bisect['appeared']}, first fixed {bisect['first_fixed']}, gained {bisect['member_gained']}; "
      f"{len(versions)} releases in {bisect['seconds']} s")
for row in bisect["rows"]:
    print(f"  {row['version']:<14} {'missing ' + str(row['missing']) if row['present'] else 'no such class'}")

# %% [markdown]
# ## 7. The newest release: wrappers still missing members

# %%
conf_newest = audit.conformance(sources.open_source(versions[-1]))
for row in conf_newest["rows"]:
    if row["missing"]:
        print(f"  {row['entry']:<40} missing {row['missing']}")

# %%
figure_paths = tracebook.figures(conf_here, conf_newest, bisect)
for path in figure_paths:
    display(Image(filename=str(path)))

# %%
sidecar = tracebook.write_sidecar({
    "parameters": {"sglang_source": sglang_source, "entry_class": entry_class, "bisect_versions": versions,
                   "model_depth": model_depth, "aux_layer_ids": aux_layer_ids,
                   "tiny_model_depth": tiny_model_depth, "tiny_aux_layer_ids": tiny_aux_layer_ids},
    "source": source_info,
    "grep": grep_hits,
    "contract": contract_sites,
    "verdict": verdict,
    "layer_ids": layer_ids,
    "conformance": {"traced": conf_here, "newest": conf_newest},
    "bisect": bisect,
    "timings": {"verdict_seconds": verdict_seconds, "audit_seconds_one_release": conf_here["seconds"],
                "bisect_seconds_warm_cache": bisect["seconds"], "bisect_releases": len(versions)},
    "figures": [p.name for p in figure_paths],
})
print(sidecar)
