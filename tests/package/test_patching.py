"""The patch tool on copies of the real sglang 0.5.9 kimi_k25.py (never on the installed package)."""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3lab.package.location import installed_root
from eagle3lab.commands import cli
from eagle3lab.package import patching
from eagle3lab.errors import PatchError
from timing import patience

KIMI = "sglang/srt/models/kimi_k25.py"
FULL = patching.PATCHES_DIR / "kimi_k25-eagle3-delegation.patch"
ONE = patching.PATCHES_DIR / "kimi_k25-one-method.patch"
DUMMY = patching.PATCHES_DIR / "kimi_k25-dummy-post-load-weights.patch"
WRAPPER = "KimiK25ForConditionalGeneration"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def root(tmp_path) -> Path:
    """A fake site-packages holding a copy of the installed (real) sglang 0.5.9 kimi_k25.py."""
    installed = installed_root() / KIMI
    if not installed.is_file():
        pytest.skip("sglang 0.5.9 with kimi_k25.py is not installed")
    root = tmp_path / "site-packages"
    (root / KIMI).parent.mkdir(parents=True)
    shutil.copy2(installed, root / KIMI)
    return root


def wrapper_methods(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == WRAPPER)
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}


def test_check_is_a_dry_run(root):
    before = sha(root / KIMI)
    result = patching.check(FULL, root)
    assert result.status == patching.APPLICABLE
    assert sha(root / KIMI) == before
    assert result.files[0].sha256_before == before != result.files[0].sha256_after
    assert [m.name for m in result.members] == ["set_eagle3_layers_to_capture", "get_embed_and_head"]


def test_apply_adds_exactly_the_delegating_members(root):
    before = wrapper_methods(root / KIMI)
    result = patching.apply(FULL, root)
    added = wrapper_methods(root / KIMI) - before
    assert result.status == patching.APPLIED and result.changed
    assert added == {m.name for m in result.members}
    assert added >= {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    for member in result.members:
        assert member.cls == WRAPPER
        assert member.delegates_to == f"self.language_model.{member.name}"
        assert member.passes_args and member.guarded and member.ok
    assert result.info.fixed_upstream.startswith("sglang 0.5.10")


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_apply_matches_gnu_patch(root, tmp_path):
    """GNU patch is an independent oracle for the hunk engine: both must produce the same bytes."""
    other = tmp_path / "gnu"
    shutil.copytree(root, other)
    subprocess.run(["patch", "-p1", "--fuzz=0", "-s", "-i", str(FULL)], cwd=other, check=True)
    patching.apply(FULL, root)
    assert sha(root / KIMI) == sha(other / KIMI)


def test_patched_methods_forward_and_fail_clearly(root):
    """Run the added methods' own code on a stand-in wrapper: calls reach the inner model, with arguments."""
    patching.apply(FULL, root)
    tree = ast.parse((root / KIMI).read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == WRAPPER)
    wanted = {"set_eagle3_layers_to_capture", "get_embed_and_head"}
    body = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    module = ast.Module([ast.ClassDef("Wrapper", [], [], body, [])], [])
    namespace: dict = {"Optional": __import__("typing").Optional, "List": list, "Tuple": tuple, "torch": None}
    exec(compile(ast.fix_missing_locations(module), "patched", "exec"), namespace)

    class Inner:
        def __init__(self):
            self.calls = []

        def set_eagle3_layers_to_capture(self, layer_ids=None):
            self.calls.append(layer_ids)

        def get_embed_and_head(self):
            return "embed", "head"

    wrapper = namespace["Wrapper"]()
    wrapper.language_model = Inner()
    wrapper.set_eagle3_layers_to_capture([2, 30, 58])
    assert wrapper.language_model.calls == [[2, 30, 58]]
    assert wrapper.get_embed_and_head() == ("embed", "head")
    wrapper.language_model = object()
    # the generated method's own AttributeError: its wording is what sglang's caller would read
    with pytest.raises(AttributeError, match="object .*has no set_eagle3_layers_to_capture"):
        wrapper.set_eagle3_layers_to_capture([1])


def test_apply_twice_is_a_no_op(root):
    patching.apply(FULL, root)
    stat = (root / KIMI).stat()
    again = patching.apply(FULL, root)
    assert again.status == patching.ALREADY_APPLIED and not again.changed
    assert "already applied" in again.message
    assert (root / KIMI).stat().st_mtime_ns == stat.st_mtime_ns
    assert patching.check(FULL, root).status == patching.ALREADY_APPLIED


def test_backup_keeps_original_with_checksum_while_applied(root):
    original = sha(root / KIMI)
    result = patching.apply(FULL, root)
    backup = Path(result.backup_dir)
    assert sha(backup / "originals" / KIMI) == original
    manifest = __import__("json").loads((backup / "manifest.json").read_text())
    assert manifest["files"][0]["sha256_original"] == original
    assert manifest["files"][0]["sha256_patched"] == sha(root / KIMI)


def test_revert_restores_the_original_bytes(root):
    original = sha(root / KIMI)
    mode = (root / KIMI).stat().st_mode
    result = patching.apply(FULL, root)
    assert patching.verify(FULL, root).status == patching.VERIFIED
    reverted = patching.revert(FULL, root)
    assert reverted.status == patching.REVERTED
    assert sha(root / KIMI) == original
    assert (root / KIMI).stat().st_mode == mode
    assert not Path(result.backup_dir).exists()
    assert patching.revert(FULL, root).status == patching.NOT_APPLIED


def test_wrong_original_is_refused_in_one_line(root):
    path = root / KIMI
    path.write_text(path.read_text().replace("return pattern.pad_input_tokens", "return pattern.pad_tokens"))
    before = sha(path)
    for action in (patching.check, patching.apply, patching.revert):
        with pytest.raises(PatchError) as err:
            action(FULL, root)
        assert (err.value.problem, err.value.file, err.value.hunk) == ("unexpected_original", KIMI, 1)
        assert err.value.patch == patching.patch_info(FULL).name
        assert "\n" not in str(err.value)
    assert sha(path) == before


def test_verify_refuses_a_patch_that_is_not_applied(root):
    with pytest.raises(PatchError) as err:
        patching.verify(FULL, root)
    assert (err.value.problem, err.value.patch) == ("not_applied", patching.patch_info(FULL).name)


def two_file_patch(root: Path, tmp_path: Path) -> Path:
    """The full patch aimed at two copies of kimi_k25.py: lets a failure hit between the two writes."""
    twin = KIMI.replace("kimi_k25.py", "kimi_k25_twin.py")
    shutil.copy2(root / KIMI, root / twin)
    diff = FULL.read_text().split("\n--- ", 1)[1]
    text = "--- " + diff + "--- " + diff.replace(KIMI, twin)
    out = tmp_path / "two.patch"
    out.write_text(text)
    return out


def test_failure_between_files_restores_every_original(root, tmp_path, monkeypatch):
    patch = two_file_patch(root, tmp_path)
    files = sorted(root.rglob("*.py"))
    before = {p: sha(p) for p in files}
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst):
        if Path(dst).is_relative_to(root):  # the package's files, not the backup in the cache
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(28, "No space left on device (injected)")
        real_replace(src, dst)

    monkeypatch.setattr(patching.os, "replace", failing_replace)
    with pytest.raises(PatchError) as err:
        patching.apply(patch, root)
    assert (err.value.problem, err.value.unrestored) == ("apply_failed", ())
    monkeypatch.setattr(patching.os, "replace", real_replace)
    assert "\n" not in str(err.value) and "no space left" in str(err.value)
    assert len(calls) == 3  # first file written, second failed, first written back: each once
    assert {p: sha(p) for p in files} == before
    assert not list(root.rglob("*.eagle3lab-tmp"))
    assert not list((tmp_path / "cache").rglob("manifest.json"))  # no backup left behind


def test_failed_verification_restores_the_original(root, tmp_path):
    """A patch that adds a method which does not forward its argument is rolled back."""
    original = (root / KIMI).read_text()
    broken = original.replace(
        "    def forward(\n",
        "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
        "        self.language_model.set_eagle3_layers_to_capture()\n\n"
        "    def forward(\n",
        1,
    )
    diff = difflib.unified_diff(
        original.splitlines(keepends=True), broken.splitlines(keepends=True), f"a/{KIMI}", f"b/{KIMI}"
    )
    patch = tmp_path / "drops-argument.patch"
    patch.write_text("".join(diff))
    with pytest.raises(PatchError) as err:
        patching.apply(patch, root)
    assert err.value.problem == "not_forwarding"
    assert (root / KIMI).read_text() == original


def _edited_full_patch(root: Path, tmp_path: Path, old: str, new: str) -> Path:
    """The full delegation patch with one edit inside the methods it adds (as a hand edit of patches/ would be)."""
    original = (root / KIMI).read_text()
    scratch = tmp_path / "scratch"
    (scratch / KIMI).parent.mkdir(parents=True)
    (scratch / KIMI).write_text(original)
    patching.apply(FULL, scratch)
    patched = (scratch / KIMI).read_text()
    patching.revert(FULL, scratch)  # and its backup goes
    assert patched.count(old) == 1, old
    diff = difflib.unified_diff(original.splitlines(keepends=True),
                                patched.replace(old, new).splitlines(keepends=True), f"a/{KIMI}", f"b/{KIMI}")
    patch = tmp_path / "side-effect.patch"
    patch.write_text((FULL.read_text().split("--- a/", 1)[0]) + "".join(diff))
    return patch


@pytest.mark.parametrize("old, new, method, quoted", [
    ("        return self.language_model.get_embed_and_head()\n",
     "        open('/tmp/eagle3lab-pwned', 'w').write('x')\n        return self.language_model.get_embed_and_head()\n",
     "get_embed_and_head", "open('/tmp/eagle3lab-pwned', 'w').write('x')"),
    ("        self.language_model.set_eagle3_layers_to_capture(layer_ids)\n",
     "        self.language_model.set_eagle3_layers_to_capture(layer_ids)\n        self.captured = layer_ids\n",
     "set_eagle3_layers_to_capture", "self.captured = layer_ids"),
    ("self.language_model.set_eagle3_layers_to_capture(layer_ids)",
     "self.language_model.set_eagle3_layers_to_capture(print(layer_ids) or layer_ids)",
     "set_eagle3_layers_to_capture", "print(layer_ids) or layer_ids"),
    ('f"{type(self).__name__}) has no get_embed_and_head; "', 'f"{__import__(\'os\').getcwd()}) has no get_embed_and_head; "',
     "get_embed_and_head", "if not hasattr(self.language_model, 'get_embed_and_head'):"),
])
def test_patch_with_a_side_effect_in_a_delegated_method_is_refused_before_anything_is_applied(
        root, tmp_path, capsys, old, new, method, quoted):
    """Issue 43, item 5 (8): a delegated method that forwards and also does something else is named, with the
    statement, and the package is left untouched (no write, no backup)."""
    patch = _edited_full_patch(root, tmp_path, old, new)
    before = sha(root / KIMI)
    for action in (patching.check, patching.apply):
        with pytest.raises(PatchError) as err:
            action(patch, root)
        assert err.value.problem == "not_only_forwarding"
        assert err.value.member == f"{WRAPPER}.{method}"
        message = str(err.value)
        assert "\n" not in message and f"{WRAPPER}.{method} does more than forward" in message
        assert quoted in message
    assert message.endswith("nothing was applied")
    assert sha(root / KIMI) == before
    assert not list((tmp_path / "cache").rglob("manifest.json"))
    assert not list(root.rglob("*.eagle3lab-tmp"))
    assert cli.main(["patch", "apply", str(patch), "--site-packages", str(root)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sha(root / KIMI) == before


def test_independent_patches_stack_and_revert_separately(root):
    original = sha(root / KIMI)
    patching.apply(FULL, root)
    stacked = patching.apply(DUMMY, root)
    assert [m.name for m in stacked.members] == ["post_load_weights"]
    patching.revert(FULL, root)
    assert "post_load_weights" in wrapper_methods(root / KIMI)
    assert "get_embed_and_head" not in wrapper_methods(root / KIMI)
    assert patching.verify(DUMMY, root).status == patching.VERIFIED
    patching.revert(DUMMY, root)
    assert sha(root / KIMI) == original


def test_one_method_patch_leaves_get_embed_and_head_out(root):
    result = patching.apply(ONE, root)
    assert [m.name for m in result.members] == ["set_eagle3_layers_to_capture"]
    assert "get_embed_and_head" not in wrapper_methods(root / KIMI)
    with pytest.raises(PatchError) as err:
        patching.apply(FULL, root)
    assert (err.value.problem, err.value.file) == ("unexpected_original", KIMI)


def test_patched_context_restores_on_error(root):
    original = sha(root / KIMI)
    with pytest.raises(RuntimeError, match="boom"):
        with patching.patched(FULL, root) as result:
            assert result.status == patching.APPLIED
            assert "get_embed_and_head" in wrapper_methods(root / KIMI)
            raise RuntimeError("boom")
    assert sha(root / KIMI) == original


def test_patched_context_keeps_a_patch_that_was_already_there(root):
    patching.apply(FULL, root)
    with patching.patched(FULL, root) as result:
        assert result.status == patching.ALREADY_APPLIED
    assert patching.check(FULL, root).status == patching.ALREADY_APPLIED


@pytest.mark.parametrize(
    "make_args, problem",
    [
        (lambda r, t: ("no-such-patch", r), "not_found"),
        (lambda r, t: (t / "empty.patch", r), "empty_diff"),
        (lambda r, t: (FULL, t / "missing-root"), "not_a_directory"),
        (lambda r, t: (FULL, t), "missing_file"),
    ],
)
def test_bad_input_is_one_clear_line(root, tmp_path, make_args, problem):
    (tmp_path / "empty.patch").write_text("just prose, no diff\n")
    with pytest.raises(PatchError) as err:
        patching.check(*make_args(root, tmp_path))
    assert err.value.problem == problem
    assert "\n" not in str(err.value)


def test_cli_prints_one_line_and_exit_codes(root, capsys):
    assert cli.main(["patch", "apply", str(FULL), "--site-packages", str(root)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"under {root.resolve()}")
    (root / KIMI).write_text("# not sglang\n")
    assert cli.main(["patch", "check", "kimi_k25-eagle3-delegation", "--site-packages", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eagle3lab: ") and err.count("\n") == 1


def test_added_members_read_the_same_before_and_after_apply(root):
    before = [m.name for m in patching.added_members(FULL, root)]
    patching.apply(FULL, root)
    after = [m.name for m in patching.added_members(FULL, root)]
    assert before == after == ["set_eagle3_layers_to_capture", "get_embed_and_head"]


def test_lock_makes_another_process_wait(root, tmp_path):
    """While one process holds the root, apply() elsewhere waits for it: patches never interleave."""
    released = tmp_path / "released"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from eagle3lab.package import patching\n"
         "with patching.held(sys.argv[1]):\n"
         "    print('held', flush=True); time.sleep(1); Path(sys.argv[2]).write_text('x')\n",
         str(root), str(released)],
        stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "held"
        patching.apply(FULL, root)
        assert released.exists(), "apply ran while another process held the lock"
    finally:
        holder.wait(timeout=patience(60))
