"""A model by hub id (issue 36, item 4): only config.json is fetched, through huggingface_hub against HF_ENDPOINT with
HF_TOKEN, from a real local HTTP server standing in for the Hub; offline is one clear line and exit 2."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.costmodel.hub import resolve_config, stored_names
from eagle3lab.costmodel.presets import load_config

REPO = "Qwen/Qwen3-235B-A22B"


class _Hub(BaseHTTPRequestHandler):
    """Serves GET/HEAD /<org>/<name>/resolve/<rev>/config.json like the Hub's resolve endpoint; records requests."""

    files: dict[str, bytes] = {}
    seen: list[tuple[str, str, str]] = []

    def _answer(self, body: bool) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        parts = self.path.split("?")[0].strip("/").split("/")
        key = "/".join(parts[:2]) + "/" + parts[-1] if len(parts) >= 5 and parts[2] == "resolve" else ""
        data = self.files.get(key)
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound" if "/".join(parts[:2]) + "/" in
                             "".join(k[:len("/".join(parts[:2])) + 1] for k in self.files) else "RepoNotFound")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
        self.send_header("X-Repo-Commit", "0" * 40)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(True)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def hub(tmp_path, monkeypatch) -> Iterator[str]:
    cfg, _ = load_config("qwen3-235b-a22b")
    cfg = {k: v for k, v in cfg.items() if k != "_source"}
    _Hub.files = {f"{REPO}/config.json": json.dumps(cfg).encode()}
    _Hub.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


def test_a_hub_id_fetches_only_config_json_with_the_token(hub):
    cfg, source, name = resolve_config(REPO)
    assert name == REPO and source == f"{hub}/{REPO} config.json"
    assert cfg["num_hidden_layers"] == 94 and cfg["architectures"] == ["Qwen3MoeForCausalLM"]
    paths = {p for _, p, _ in _Hub.seen}
    assert paths and all(p.split("?")[0].endswith("/config.json") for p in paths)  # nothing but config.json
    assert all(auth == "Bearer hf_test_token" for _, _, auth in _Hub.seen)


def test_predict_by_hub_id_echoes_the_fetched_model(hub, capsys):
    args = ["predict", "--config", REPO, "--hardware", "h200", "--tp", "8", "--steps", "3", "--topk", "1",
            "--draft-tokens", "4", "--accept", "2.5", "--context", "1024", "--batch", "1,16", "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == REPO and any("235.1B parameters" in u for u in data["understood"])


def test_offline_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    args = ["predict", "--config", "someorg/some-model", "--hardware", "h200", "--tp", "1", "--steps", "3", "--topk",
            "1", "--draft-tokens", "4", "--accept", "2", "--context", "512", "--batch", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "offline or unreachable" in err and "pass a local config.json" in err and len(err.splitlines()) == 1


def test_stored_configs_answer_by_name_in_any_case():
    names = stored_names()
    for wanted in ("deepseek-v3", "deepseek-r1", "qwen3-235b-a22b", "llama-3.3-70b-instruct", "glm-4.7-flash"):
        assert wanted in names
    cfg, source, name = resolve_config("DeepSeek-V3")
    assert name == "deepseek-v3" and "huggingface.co/deepseek-ai/DeepSeek-V3" in source
