"""The installed package against its release's RECORD: the one comparison preflight, the trace and restore use."""

from __future__ import annotations

import base64
import hashlib

from eagle3lab.package.release import drift, release_record


def _fake_site(tmp_path):
    """A distribution named sglang laid out as pip installs it: three files and their RECORD."""
    pkg, info = tmp_path / "sglang", tmp_path / "sglang-9.9.9.dist-info"
    pkg.mkdir()
    info.mkdir()
    record = []
    for name in ("a.py", "b.py", "c.py"):
        data = f"# {name}\n".encode()
        (pkg / name).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"sglang/{name},sha256={digest},{len(data)}")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
    (info / "RECORD").write_text("\n".join(record + ["sglang-9.9.9.dist-info/RECORD,,"]) + "\n")
    return pkg


def test_drift_names_edited_missing_and_stray_files(tmp_path):
    pkg = _fake_site(tmp_path)
    assert release_record(tmp_path).version == "9.9.9"
    assert drift(tmp_path).clean
    (pkg / "a.py").write_text("# patched\n")
    (pkg / "c.py").unlink()
    (pkg / "b.py.eagle3lab-tmp").write_text("half a write")
    diff = drift(tmp_path)
    assert (diff.modified, diff.missing, diff.stray) == (("sglang/a.py",), ("sglang/c.py",), ("sglang/b.py.eagle3lab-tmp",))
    assert not diff.clean


def test_a_folder_without_an_sglang_record_has_no_drift_to_report(tmp_path):
    assert release_record(tmp_path) is None and drift(tmp_path) is None
