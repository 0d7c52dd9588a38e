"""The checks of what is installed and downloaded: the sglang release (and whether it is still pristine), both
checkpoints, free disk.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from eagle3lab.errors import Eagle3LabError
from eagle3lab.runtime import checkpoints, deployment, envinfo
from eagle3lab.runtime.checkpoints import Checkpoint
from eagle3lab.runtime.profiles import Profile
from eagle3lab.package import inuse, patching
from eagle3lab.package.location import installed_root
from eagle3lab.preflight.result import Check, Outcome, plural, size_text


def check_sglang(profile: Profile) -> Check:
    name = "sglang"
    try:
        version = envinfo.check_sglang(profile.sglang_version)
    except Eagle3LabError as exc:
        return Check(name, "fail", str(exc), "make setup")
    changes = envinfo.installed_changes()
    data = {"version": version, **changes}
    if changes["missing"] or changes["modified"]:
        busy = _in_use()
        if busy:
            data["in_use"] = busy.describe()
            # A job holding the patch lock may be mid-patch, or keep its backups in another cache: what it
            # changed goes back when it ends, so this warns (a run waits for the lock) instead of failing.
            others = sorted(set(changes["modified"] + changes["missing"]) - busy.files)
            also = (f"; {plural(len(others), 'file')} differs from the release beyond the patches named here "
                    f"(first: {others[0]})" if others else "")
            outcome: Outcome = "warn" if busy.patch_lock or not others else "fail"
            return Check(name, outcome, f"sglang {version} is in use by a running job, not drifted: "
                                        f"{busy.describe()}{also}",
                         f"wait for {busy.holder()} to end (it puts sglang's files back), then run preflight again",
                         data)
    if changes["missing"]:
        return Check(name, "fail", f"sglang {version} is missing {plural(len(changes['missing']), 'file')} of its "
                                   f"release (first: {changes['missing'][0]})",
                     f"pip install --force-reinstall --no-deps sglang=={version}", data)
    if not changes["modified"]:
        return Check(name, "ok", f"sglang {version}, every file as in the release wheel's RECORD", data=data)

    applied = []
    for path in sorted(patching.PATCHES_DIR.glob("*.patch")):
        try:
            if patching.check(path).status == patching.ALREADY_APPLIED:
                applied.append(path.stem)
        except Eagle3LabError:
            pass
    data["project_patches_applied"] = applied
    if applied:
        return Check(name, "fail", f"sglang {version} carries the project's patch {', '.join(applied)} "
                                   "(notebook 01 needs the release as published)",
                     " ; ".join(f"python -m eagle3lab patch revert {p}" for p in applied), data)
    return Check(name, "fail", f"sglang {version} differs from its release in "
                               f"{plural(len(changes['modified']), 'file')} (first: {changes['modified'][0]})",
                 f"pip install --force-reinstall --no-deps sglang=={version}", data)


def _in_use() -> inuse.InUse | None:
    """Who holds the installed sglang's files now (None if that cannot be read: the drift is reported as is)."""
    try:
        return inuse.in_use(installed_root())
    except (Eagle3LabError, OSError):
        return None


def check_checkpoint(profile: Profile, ckpt: Checkpoint) -> Check:
    name = f"{ckpt.role} checkpoint"
    fetch = deployment.fetch_command(profile)
    if ckpt.kind == "generated":
        checkpoints.examine(ckpt)
        outcome: Outcome = "ok" if ckpt.complete else "fail"
        return Check(name, outcome, f"generated tiny model at {ckpt.path} ({size_text(ckpt.bytes)})"
                     + (f": {'; '.join(ckpt.problems)}" if ckpt.problems else ""),
                     None if ckpt.complete else "python -m eagle3lab setup --profile " + profile.name, ckpt.to_dict())
    if not ckpt.present:
        where = f"the Hugging Face cache at {checkpoints.hub_cache_dir()}" if ckpt.kind == "hub" else "this machine"
        detail = f"{ckpt.source} is not in {where}" + (f" ({ckpt.problems[0]})" if ckpt.problems else "")
        return Check(name, "fail", detail, fetch if ckpt.kind == "hub" else
                     f"point the profile's {ckpt.role}_model at a model directory", ckpt.to_dict())
    checkpoints.examine(ckpt)
    origin = f"snapshot {ckpt.revision[:12]}" if ckpt.revision else "local directory"
    summary = f"{ckpt.source} at {ckpt.path} ({origin}): {plural(ckpt.files, 'file')}, {size_text(ckpt.bytes)}"
    if ckpt.problems:
        return Check(name, "fail", f"{summary}; incomplete: {'; '.join(ckpt.problems[:3])}",
                     f"{fetch} (resumes)" if ckpt.kind == "hub" else "copy the checkpoint again", ckpt.to_dict())
    return Check(name, "ok", f"{summary}; complete ({ckpt.checked})", data=ckpt.to_dict())


def check_disk(ckpts: list[Checkpoint]) -> Check:
    present = [Path(c.path) for c in ckpts if c.path]
    where = present[0] if present else checkpoints.hub_cache_dir()
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    detail = f"{usage.free / 1e9:.1f} GB free of {usage.total / 1e9:.1f} GB at {where}"
    data = {"path": str(where), "free_bytes": usage.free, "total_bytes": usage.total}
    if all(c.present for c in ckpts):
        return Check("free disk", "info", detail, data=data)
    return Check("free disk", "info", detail + "; fetch-models compares it with the hub's size before downloading",
                 data=data)
