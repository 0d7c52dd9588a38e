"""sources: installed package, wheels read as zips, the cache, and one-line errors for bad input."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

import synthetic_sglang as syn
from eagle3lab.package import wheels
from eagle3lab.trace import sources
from eagle3lab.errors import SourceError


def index_of(root: Path, versions: tuple[str, ...]) -> str:
    """A PEP 503 index on disk under ``root`` that holds these releases of a synthetic sglang."""
    files = root / "index" / "files"
    files.mkdir(parents=True)
    page = root / "index" / "simple" / "sglang"
    page.mkdir(parents=True)
    links = []
    for version in versions:
        name = f"sglang-{version}-py3-none-any.whl"
        syn.write_wheel(files / name, version)
        links.append(f'<a href="../../files/{name}">{name}</a>')
    page.joinpath("index.html").write_text(f"<html><body>{''.join(links)}</body></html>")
    return (root / "index" / "simple").as_uri()


@pytest.fixture
def fake_index(tmp_path: Path) -> str:
    """A PEP 503 index on disk that holds one release, 1.0.0, of a synthetic sglang."""
    return index_of(tmp_path, ("1.0.0",))


def test_installed_source_is_the_importable_release():
    src = sources.installed_source()
    assert src.version == metadata.version("sglang")
    assert "srt/model_executor/model_runner.py" in src.files("srt/model_executor")
    assert src.tree("srt/model_executor/model_runner.py") is not None
    assert all(path.endswith(".py") for path in src.files())


def test_wheel_source_reads_paths_relative_to_the_package_and_strips_bom(tmp_path: Path):
    wheel = syn.write_wheel(tmp_path / "sglang-0.0.0-py3-none-any.whl")
    src = sources.wheel_source(wheel, "0.0.0")
    assert src.exists("srt/speculative/eagle_worker.py")
    assert syn.RUNTIME["srt/speculative/eagle_worker.py"].startswith(syn.BOM)
    assert not src.text("srt/speculative/eagle_worker.py").startswith(syn.BOM)
    assert src.tree("srt/speculative/eagle_worker.py") is not None
    assert src.files("srt/models") == sorted({**syn.MODELS, **syn.DRAFTERS})


def test_unparsable_and_compiled_files_are_reported_not_dropped(tmp_path: Path):
    wheel = tmp_path / "sglang-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sglang/srt/broken.py", "def f(:\n")
        zf.writestr("sglang/srt/fast.cpython-311-x86_64-linux-gnu.so", b"\x7fELF")
        zf.writestr("sglang/srt/latin.py", "x = '\xe9'\n".encode("latin-1"))
    src = sources.wheel_source(wheel, "0.0.0")
    assert src.tree("srt/broken.py") is None
    reasons = {s.path: s.reason for s in src.skipped}
    assert "parse" in reasons["srt/broken.py"]
    assert "compiled" in reasons["srt/fast.cpython-311-x86_64-linux-gnu.so"]
    assert "UTF-8" in reasons["srt/latin.py"]


def test_corrupt_wheel_is_one_line(tmp_path: Path):
    bad = tmp_path / "sglang-0.0.1-py3-none-any.whl"
    bad.write_bytes(b"this is not a zip")
    with pytest.raises(SourceError) as err:
        sources.wheel_source(bad, "0.0.1")
    assert (err.value.problem, err.value.path, err.value.version) == ("corrupt", bad, "0.0.1")
    assert "\n" not in str(err.value)


def test_wheel_with_bad_crc_is_corrupt(tmp_path: Path):
    wheel = tmp_path / "sglang-0.0.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("sglang/srt/a.py", "A = 'xxxxxxxxxxxxxxxx'\n")
    data = bytearray(wheel.read_bytes())
    data[data.index(b"xxxx")] = ord("y")  # flip one byte of the stored member
    wheel.write_bytes(bytes(data))
    with pytest.raises(SourceError) as err:
        sources.wheel_source(wheel, "0.0.2")
    assert (err.value.problem, err.value.path) == ("corrupt", wheel)


def test_not_a_version_is_one_line():
    with pytest.raises(SourceError) as err:
        sources.open_source("latest-please")
    assert (err.value.problem, err.value.version) == ("not_a_version", "latest-please")


def test_download_then_cache_from_a_local_index(tmp_path: Path, fake_index: str):
    folder = tmp_path / "wheels"
    folder.mkdir()
    got = wheels.fetch_wheel("1.0.0", folder, fake_index)
    assert got.parent == folder and got.name == "sglang-1.0.0-py3-none-any.whl"
    assert not [p for p in folder.iterdir() if p.is_dir()], "no temporary download folder left behind"
    # cached: an unreachable index is never asked again
    assert wheels.fetch_wheel("1.0.0", folder, "http://127.0.0.1:9/simple") == got
    assert wheels.list_releases(fake_index) == ["1.0.0"]


def test_several_releases_download_at_once_and_come_back_in_the_order_asked(tmp_path: Path):
    releases = ("1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "2.0.0")
    index = index_of(tmp_path, releases)
    folder = tmp_path / "wheels"
    folder.mkdir()
    asked = list(reversed(releases))
    got = wheels.fetch_wheels(asked, folder, index)
    assert [path.name for path in got] == [f"sglang-{version}-py3-none-any.whl" for version in asked]
    assert sorted(folder.iterdir()) == sorted(got), "every wheel under its own name, no temporary folder left"


def test_one_missing_release_among_several_is_its_one_line_error(tmp_path: Path):
    index = index_of(tmp_path, ("1.0.0", "1.1.0"))
    folder = tmp_path / "wheels"
    folder.mkdir()
    with pytest.raises(SourceError) as err:
        wheels.fetch_wheels(["1.0.0", "9.9.9", "1.1.0"], folder, index)
    assert (err.value.problem, err.value.version) == ("not_on_index", "9.9.9")
    assert not [p for p in folder.iterdir() if p.is_dir()], "no temporary download folder left behind"


def test_unknown_version_names_the_newest(tmp_path: Path, fake_index: str):
    with pytest.raises(SourceError) as err:
        wheels.fetch_wheel("2.0.0", tmp_path, fake_index)
    assert (err.value.problem, err.value.version, err.value.newest) == ("not_on_index", "2.0.0", "1.0.0")


def test_no_network_and_empty_cache_is_one_line(tmp_path: Path):
    with pytest.raises(SourceError) as err:
        wheels.fetch_wheel("0.5.9", tmp_path, "http://127.0.0.1:9/simple")
    assert (err.value.problem, err.value.version, err.value.path) == ("offline", "0.5.9", tmp_path)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(SourceError) as err:
        wheels.list_releases("http://127.0.0.1:9/simple")
    assert err.value.problem == "offline"


class _Record(SimpleNamespace):
    """Shaped like importlib.metadata's PackagePath: str() is the path, .hash has mode and value."""

    def __str__(self) -> str:
        return self.rel


def _sha(data: bytes) -> SimpleNamespace:
    value = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return SimpleNamespace(mode="sha256", value=value)


@pytest.mark.network
def test_newest_release_wheel_is_read_without_installing():
    newest = wheels.list_releases()[-1]
    src = sources.open_source(newest)
    assert src.version == newest
    assert src.origin.endswith(".whl")
    assert src.files("srt/models")
    assert any(p.endswith("model_runner.py") for p in src.files("srt/model_executor"))
