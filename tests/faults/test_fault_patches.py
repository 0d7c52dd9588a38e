"""Confined patches and failed applies: every path of a patch must resolve inside the target sglang package
(refused before any write), backups stay inside the cache, the lock lives beside the package, and a failed apply
puts back exactly what it changed, once, in one line, leaving no manifest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3lab.package import backups, patching

from .faultkit import (
    FULL,
    KIMI,
    cli,
    default_signals,
    in_namespace,
    needs_namespace,
    one_line,
    patience,
)

PATCH = patching.PATCHES_DIR / f"{FULL}.patch"


def retarget(tmp_path: Path, new_path: str, name: str = "hostile", header: str = "") -> Path:
    """The real delegation patch with its file path replaced (``---`` and ``+++`` lines)."""
    text = PATCH.read_text().replace(f"a/{KIMI}", f"a/{new_path}").replace(f"b/{KIMI}", f"b/{new_path}")
    out = tmp_path / f"{name}.patch"
    out.write_text(header + text)
    return out


def outside_victim(tmp_path: Path, sandbox) -> Path:
    """A copy of kimi_k25.py outside the package, where a hostile patch would land."""
    victim = tmp_path / "outside" / "kimi_k25.py"
    victim.parent.mkdir()
    victim.write_bytes(sandbox.kimi.read_bytes())
    return victim


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "other-package", "dotdot-inside"])
def test_patch_paths_outside_the_package_are_refused_before_any_write(sandbox, tmp_path, kind):
    victim = outside_victim(tmp_path, sandbox)
    paths = {
        "dotdot": "sglang/../../outside/kimi_k25.py",
        "absolute": str(victim),
        "other-package": "numpy/kimi_k25.py",
        "dotdot-inside": "sglang/srt/../srt/models/kimi_k25.py",
    }
    (sandbox.root / "numpy").mkdir()
    (sandbox.root / "numpy" / "kimi_k25.py").write_bytes(sandbox.kimi.read_bytes())
    patch = retarget(tmp_path, paths[kind])
    if kind == "absolute":  # "+++ /abs/path" without a b/ prefix
        patch.write_text(patch.read_text().replace(f"b/{victim}", str(victim)).replace(f"a/{victim}", str(victim)))
    before = {p: p.read_bytes() for p in (victim, sandbox.root / "numpy" / "kimi_k25.py")}
    result = cli(sandbox, "patch", "apply", str(patch))
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "refused" in line and "nothing was written" in line and "applied" not in line.split("refused")[0]
    assert {p: p.read_bytes() for p in before} == before
    sandbox.assert_nothing_left()
    assert not (sandbox.cache / "patch-backups").exists() or not list((sandbox.cache / "patch-backups").rglob("*.py"))


def test_symlink_leaving_the_package_is_refused(sandbox, tmp_path):
    victim = outside_victim(tmp_path, sandbox)
    link = sandbox.root / "sglang" / "srt" / "escape"
    link.symlink_to(victim.parent, target_is_directory=True)
    patch = retarget(tmp_path, "sglang/srt/escape/kimi_k25.py")
    before = victim.read_bytes()
    result = cli(sandbox, "patch", "apply", str(patch))
    assert result.returncode == 2
    assert f"resolves to {victim}, outside" in one_line(result.stderr)
    assert victim.read_bytes() == before
    link.unlink()
    sandbox.assert_nothing_left()


def test_patch_name_cannot_steer_the_backup_out_of_the_cache(sandbox, tmp_path):
    """``Patch-Name`` comes from the patch file: it names the backup folder only after being made safe."""
    patch = tmp_path / "named.patch"
    patch.write_text("Patch-Name: ../../../../escaped\n\n" + PATCH.read_text().split("\n\n", 1)[1])
    result = cli(sandbox, "patch", "apply", str(patch))
    assert result.returncode == 0, result.stderr
    found = sandbox.manifests()
    assert len(found) == 1 and backups.inside(found[0], sandbox.cache / "patch-backups")
    assert not list(tmp_path.rglob("escaped*"))
    assert cli(sandbox, "patch", "revert", str(patch)).returncode == 0
    sandbox.assert_nothing_left()


def test_lock_lives_beside_the_package_and_is_shared_across_caches(sandbox, tmp_path):
    """Two processes with different EAGLE3LAB_CACHE patch the same sglang one after the other, never at once."""
    released = tmp_path / "released"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from eagle3lab.package import patching\n"
         "with patching.held():\n"
         "    print('held', flush=True); time.sleep(2); Path(sys.argv[1]).write_text('x')\n", str(released)],
        stdout=subprocess.PIPE, text=True, env=sandbox.env(EAGLE3LAB_CACHE=str(tmp_path / "cache-a")))
    try:
        assert holder.stdout.readline().strip() == "held"
        assert (sandbox.root / backups.LOCK_NAME).is_file()  # beside sglang/, not in either cache
        result = cli(sandbox, "patch", "apply", FULL, EAGLE3LAB_CACHE=str(tmp_path / "cache-b"))
        assert result.returncode == 0, result.stderr
        assert released.exists(), "apply ran while a process with another cache held the lock"
        assert f"waiting for pid {holder.pid} (" in result.stderr  # the holder is named
    finally:
        holder.wait(timeout=patience(60))
    assert cli(sandbox, "patch", "restore", EAGLE3LAB_CACHE=str(tmp_path / "cache-b")).returncode == 0
    sandbox.assert_release()


# ---------------------------------------------------------------------------------------------------------
# A failed apply restores exactly what it changed, once, and leaves no manifest


def read_only(folder: Path) -> tuple[list[str], str]:
    """A real read-only folder: a read-only bind mount in a private namespace (root ignores modes), else 0555."""
    if os.geteuid() == 0:
        return in_namespace(f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}",
                            []), ""
    folder.chmod(0o555)
    return [], str(folder)


@needs_namespace
def test_apply_on_a_read_only_models_folder_fails_once_in_one_line(sandbox, tmp_path):
    models = sandbox.root / "sglang" / "srt" / "models"
    stat_before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in models.iterdir() if p.is_file()}
    prefix, _ = read_only(models)
    result = subprocess.run([*prefix, sys.executable, "-m", "eagle3lab", "patch", "apply", FULL],
                            capture_output=True, text=True, env=sandbox.env(), timeout=patience(120), preexec_fn=default_signals)
    if not prefix:
        models.chmod(0o755)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "applying failed" in line and "the package is unchanged" in line and "Read-only" in line
    assert result.stderr.count("eagle3lab:") == 1
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in models.iterdir() if p.is_file()} == stat_before
    sandbox.assert_nothing_left()  # no manifest: nothing was changed, so nothing needs restoring


@needs_namespace
def test_apply_with_a_full_cache_writes_nothing_to_the_package(sandbox, tmp_path):
    """No room for the backup: the originals cannot be saved, so the package is not touched."""
    mount = f"mount -t tmpfs -o size=64k tmpfs {sandbox.cache} && head -c 60000 /dev/zero > {sandbox.cache}/fill"
    sandbox.cache.mkdir()
    result = subprocess.run(in_namespace(mount, [sys.executable, "-m", "eagle3lab", "patch", "apply", FULL]),
                            capture_output=True, text=True, env=sandbox.env(), timeout=patience(120), preexec_fn=default_signals)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "could not save the originals (no space left on the device" in line and "nothing was applied" in line
    sandbox.assert_nothing_left()


def test_failure_between_two_files_puts_back_only_the_first(sandbox, tmp_path, monkeypatch):
    """The second file cannot be replaced: the first is written back once, the never-touched second is not
    rewritten, and the backup goes away with the attempt."""
    twin = KIMI.replace("kimi_k25.py", "kimi_k25_twin.py")
    (sandbox.root / twin).write_bytes(sandbox.kimi.read_bytes())
    diff = PATCH.read_text().split("\n--- ", 1)[1]
    patch = tmp_path / "two.patch"
    patch.write_text("--- " + diff + "--- " + diff.replace(KIMI, twin))
    writes: list[str] = []
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).is_relative_to(sandbox.root):
            writes.append(Path(dst).name)
            if Path(dst).name == "kimi_k25_twin.py":
                raise OSError(30, "Read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(patching.PatchError) as err:
        patching.apply(patch, sandbox.root)
    assert (err.value.problem, err.value.unrestored) == ("apply_failed", ())
    assert "Read-only file system" in str(err.value)  # the OS reason reaches the one line
    monkeypatch.setattr(os, "replace", real_replace)
    assert writes == ["kimi_k25.py", "kimi_k25_twin.py", "kimi_k25.py"]
    assert "\n" not in str(err.value)
    (sandbox.root / twin).unlink()
    sandbox.assert_nothing_left()


def test_interrupt_during_apply_waits_until_the_files_are_consistent(sandbox, tmp_path):
    """A signal arriving while the files are being written is handled after the patch is complete, and the
    ``patched`` block then reverts it: never half a patch."""
    script = (
        "import os, signal, time\n"
        "from eagle3lab.package import patching, transaction\n"
        "real = transaction.write_atomic\n"
        "def slow(path, text):\n"
        "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.2); real(path, text)\n"
        "transaction.write_atomic = slow\n"
        f"with patching.patched({FULL!r}):\n"
        "    print('inside the block', flush=True)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=sandbox.env(),
                            timeout=patience(120))
    assert "Interrupted" in result.stderr and "inside the block" not in result.stdout
    sandbox.assert_nothing_left()
