"""fetch-models against a hub mirror on localhost: sizes, free disk, resume, manifest, then offline resolution.

There is no network here, so the "mirror" is a small HTTP server answering the three requests huggingface_hub
makes (model info with file sizes, HEAD and GET of /resolve/), serving the tiny models under the GPU profile's
repo ids. huggingface_hub's real client does the rest (hence ``_mocked_hub`` in the names).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import HUB_IDS

from eagle3lab.errors import FetchError
from eagle3lab.runtime import checkpoints, deployment, fetch
from eagle3lab import preflight
from eagle3lab.runtime.profiles import load_profile

COMMITS = {"moonshotai/Kimi-K2.5": "a" * 40, "AQ-MedAI/Kimi-K25-eagle3": "b" * 40}

# the mocked hub serves models only: its tests leave the profile's dataset file out (test_conversations has its own)
MODELS_ONLY = {"bench_prompt_kind": "ids", "bench_dataset": None, "bench_dataset_file": None}


class Mirror:
    """Serves directories as hub repos; records every request (method, path, Range)."""

    def __init__(self, repos: dict[str, Path]):
        self.repos = {repo: {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
                             if p.is_file()} for repo, root in repos.items()}
        self.requests: list[tuple[str, str, str | None]] = []
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                mirror.handle(self, head=False)

            def do_HEAD(self):
                mirror.handle(self, head=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, req: BaseHTTPRequestHandler, head: bool) -> None:
        path = unquote(urlparse(req.path).path)
        self.requests.append(("HEAD" if head else "GET", path, req.headers.get("Range")))
        for repo, files in self.repos.items():
            if path in (f"/api/models/{repo}", f"/api/models/{repo}/revision/main",
                        f"/api/models/{repo}/revision/{COMMITS[repo]}"):
                body = json.dumps({"id": repo, "sha": COMMITS[repo], "siblings": [
                    {"rfilename": name, "size": len(data)} for name, data in files.items()]}).encode()
                return self.send(req, 200, body, {"Content-Type": "application/json"}, head)
            prefix = f"/{repo}/resolve/{COMMITS[repo]}/"
            if path.startswith(prefix) and path[len(prefix):] in files:
                data = files[path[len(prefix):]]
                headers = {"X-Repo-Commit": COMMITS[repo], "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
                start = int(req.headers["Range"].split("=")[1].split("-")[0]) if req.headers.get("Range") else 0
                if start:
                    headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                return self.send(req, 206 if start else 200, data[start:], headers, head)
        self.send(req, 404, b'{"error": "not found"}', {"X-Error-Code": "RepoNotFound"}, head)

    @staticmethod
    def send(req, status, body, headers, head):
        req.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            req.send_header(key, value)
        req.end_headers()
        if not head:
            req.wfile.write(body)


@pytest.fixture
def mirror(tiny_models):
    server = Mirror({HUB_IDS["target"]: Path(tiny_models.target), HUB_IDS["draft"]: Path(tiny_models.draft)})
    yield server
    server.close()


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "e3l"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "hf" / "hub"


def test_fetch_then_everything_resolves_offline_mocked_hub(mirror, fresh_cache, monkeypatch, tiny_models):
    profile = load_profile("blackwell-8x", overrides=MODELS_ONLY)
    lines: list[str] = []
    result = fetch.fetch_models(profile, endpoint=mirror.url, echo=lines.append)
    target_bytes = sum(p.stat().st_size for p in Path(tiny_models.target).iterdir())
    assert lines[0].startswith(f"target moonshotai/Kimi-K2.5 @ {'a' * 12}: 6 files, "
                               f"{target_bytes / 1e9:.2f} GB; 0.00 GB already here")
    assert set(result.paths) == {"target", "draft"}
    # offline from here on: the launch's view
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models = deployment.resolve_models(profile)
    assert Path(models.target) == fresh_cache / "models--moonshotai--Kimi-K2.5" / "snapshots" / ("a" * 40)
    for role in ("target", "draft"):
        check = preflight.check_checkpoint(profile, checkpoints.locate(role, HUB_IDS[role]))
        assert check.outcome == "ok", check.detail
    assert checkpoints.manifest_path(HUB_IDS["draft"], "b" * 40).is_file()


def test_a_second_fetch_downloads_nothing_mocked_hub(mirror, fresh_cache):
    profile = load_profile("blackwell-8x", overrides=MODELS_ONLY)
    fetch.fetch_models(profile, endpoint=mirror.url, echo=lambda _: None)
    mirror.requests.clear()
    lines: list[str] = []
    fetch.fetch_models(profile, endpoint=mirror.url, echo=lines.append)
    assert "0.00 GB to fetch" in lines[0] and "0.00 GB to fetch" in lines[1]
    assert not [r for r in mirror.requests if r[0] == "GET" and "/resolve/" in r[1]]


def test_an_interrupted_file_is_resumed_not_restarted_mocked_hub(mirror, fresh_cache, tiny_models):
    weights = (Path(tiny_models.draft) / "model.safetensors").read_bytes()
    blobs = checkpoints.repo_folder(HUB_IDS["draft"]) / "blobs"
    blobs.mkdir(parents=True)
    half = len(weights) // 2
    (blobs / (hashlib.sha256(weights).hexdigest() + ".incomplete")).write_bytes(weights[:half])
    fetch.fetch_models(load_profile("blackwell-8x", overrides=MODELS_ONLY), endpoint=mirror.url, echo=lambda _: None)
    ranged = [r for r in mirror.requests if r[0] == "GET" and r[1].endswith("/model.safetensors") and r[2]]
    assert [r[2] for r in ranged if "eagle3" in r[1]] == [f"bytes={half}-"]
    snapshot = checkpoints.repo_folder(HUB_IDS["draft"]) / "snapshots" / ("b" * 40)
    assert (snapshot / "model.safetensors").read_bytes() == weights


def test_configs_only_is_enough_for_the_layer_ids_but_not_for_a_launch_mocked_hub(mirror, fresh_cache, tiny_models):
    profile = load_profile("blackwell-8x", overrides=MODELS_ONLY)
    fetch.fetch_models(profile, endpoint=mirror.url, configs_only=True, echo=lambda _: None)
    served = json.loads((Path(tiny_models.draft) / "config.json").read_text())["eagle_config"]
    assert deployment.layer_setup(profile).aux_layer_ids == served["eagle_aux_hidden_state_layer_ids"]
    check = preflight.check_checkpoint(profile, checkpoints.locate("target", HUB_IDS["target"]))
    assert check.outcome == "fail" and "safetensors" in check.detail and "(resumes)" in check.fix


def test_a_local_dir_download_says_how_to_point_the_profile_at_it_mocked_hub(mirror, fresh_cache, tmp_path):
    lines: list[str] = []
    result = fetch.fetch_models(load_profile("blackwell-8x", overrides=MODELS_ONLY), endpoint=mirror.url, local_dir=tmp_path / "models",
                                echo=lines.append)
    assert Path(result.paths["draft"]) == tmp_path / "models" / "AQ-MedAI" / "Kimi-K25-eagle3"
    assert lines[-1] == (f"the files are outside the Hugging Face cache; run with: --set target_model="
                         f"{tmp_path / 'models' / 'moonshotai' / 'Kimi-K2.5'} --set draft_model="
                         f"{tmp_path / 'models' / 'AQ-MedAI' / 'Kimi-K25-eagle3'}")
    local = load_profile("blackwell-8x", overrides={**MODELS_ONLY, "target_model": result.paths["target"],
                                                    "draft_model": result.paths["draft"]})
    assert deployment.resolve_models(local).draft == str(Path(result.paths["draft"]).resolve())


def test_not_enough_disk_stops_before_downloading(fresh_cache, tmp_path):
    plan = fetch.RepoPlan("target", "moonshotai/Kimi-K2.5", "a" * 40, {"model.safetensors": 10**15})
    with pytest.raises(FetchError) as err:
        fetch.check_free_disk([plan], tmp_path)
    assert (err.value.problem, err.value.needed_gb, err.value.path) == ("no_space", 1e6, tmp_path)
    assert err.value.free_gb < err.value.needed_gb


def test_an_unreachable_hub_is_one_line(fresh_cache):
    with pytest.raises(FetchError) as err:
        fetch.plan("target", "moonshotai/Kimi-K2.5", endpoint="http://127.0.0.1:9")
    assert str(err.value).startswith("cannot list moonshotai/Kimi-K2.5 on http://127.0.0.1:9 (")
    assert "\n" not in str(err.value)


def test_tiny_profiles_have_nothing_to_fetch():
    assert fetch.hub_repos(load_profile("cpu")) == [] and fetch.hub_repos(load_profile("gpu-1x")) == []
    assert fetch.hub_repos(load_profile("blackwell-8x", overrides=MODELS_ONLY)) == [("target", HUB_IDS["target"]),
                                                             ("draft", HUB_IDS["draft"])]


def test_only_what_serving_needs_is_fetched_mocked_hub(fresh_cache, tmp_path, tiny_models):
    """A drafter repo that also carries an optimizer state: it is left out, named, and the snapshot is complete."""
    import shutil

    draft = tmp_path / "draft_repo"
    shutil.copytree(tiny_models.draft, draft)
    (draft / "training_state.pt").write_bytes(b"\0" * 4096)
    server = Mirror({HUB_IDS["target"]: Path(tiny_models.target), HUB_IDS["draft"]: draft})
    try:
        lines: list[str] = []
        fetch.fetch_models(load_profile("blackwell-8x", overrides=MODELS_ONLY), endpoint=server.url, echo=lines.append)
        got = [r[1] for r in server.requests if r[0] == "GET" and "/resolve/" in r[1]]
    finally:
        server.close()
    assert not any(path.endswith("training_state.pt") for path in got)
    assert any(path.endswith(".safetensors") for path in got)
    assert "left out: training_state.pt" in lines[1]
    check = preflight.check_checkpoint(load_profile("blackwell-8x", overrides=MODELS_ONLY), checkpoints.locate("draft", HUB_IDS["draft"]))
    assert check.outcome == "ok", check.detail


def test_serving_patterns_prefer_safetensors_and_fall_back_to_bin():
    assert fetch.serving_patterns(["model.safetensors", "pytorch_model.bin"])[-1] == "*.safetensors"
    assert fetch.serving_patterns(["pytorch_model.bin", "config.json"])[-1] == "*.bin"
