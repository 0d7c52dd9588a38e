"""The CI a team copies (.github/workflows/, docs/ci/gitlab-ci.example.yml): both workflows pass actionlint (with
shellcheck on every ``run:``) and zizmor (pedantic, every action pinned by commit SHA), and say what the README and
the issue promise: the README's main command, artifacts uploaded also when a notebook fails, inputs never expanded
into a script, read-only permissions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from eagle3lab.paths import REPO_ROOT
from timing import patience

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
NOTEBOOKS, CANARY = WORKFLOWS / "notebooks.yml", WORKFLOWS / "canary.yml"
GITLAB = REPO_ROOT / "docs" / "ci" / "gitlab-ci.example.yml"
BIN = Path(sys.executable).parent  # the tools are pinned in requirements-test.txt, installed beside this interpreter


def tool(name: str) -> str:
    path = BIN / name
    assert path.is_file(), f"{name} is not installed beside {sys.executable}; pip install -r requirements-test.txt"
    return str(path)


def workflow(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def steps(path: Path) -> list[dict[str, Any]]:
    return [step for job in workflow(path)["jobs"].values() for step in job["steps"]]


def test_both_workflows_pass_actionlint_with_shellcheck():
    done = subprocess.run([tool("actionlint"), "-no-color", f"-shellcheck={tool('shellcheck')}", str(NOTEBOOKS),
                           str(CANARY)], capture_output=True, text=True, timeout=patience(120), cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_both_workflows_pass_zizmor_pedantic():
    done = subprocess.run([tool("zizmor"), "--offline", "--no-progress", "--persona=pedantic", "--config",
                           str(REPO_ROOT / ".github" / "zizmor.yml"), str(NOTEBOOKS), str(CANARY)],
                          capture_output=True, text=True, timeout=patience(120), cwd=REPO_ROOT)
    assert done.returncode == 0 and "No findings" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("path", [NOTEBOOKS, CANARY], ids=["notebooks", "canary"])
def test_read_only_pinned_and_no_expression_in_a_script(path):
    data = workflow(path)
    assert data["permissions"] == {"contents": "read"}
    for step in steps(path):
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        assert "${{" not in step.get("run", ""), step["run"]
    for job in data["jobs"].values():
        assert isinstance(job["timeout-minutes"], int)
        assert all(step.get("with", {}).get("persist-credentials") is False
                   for step in job["steps"] if step.get("uses", "").startswith("actions/checkout@"))
    text = path.read_text(encoding="utf-8")
    for action in re.findall(r"uses: (\S+)@[0-9a-f]{40} # (v\d+\.\d+\.\d+)", text):
        assert action  # every pin names the release tag it is
    assert len(re.findall(r"uses: \S+@[0-9a-f]{40} # v\d+\.\d+\.\d+\n", text)) == text.count("uses: ")


def readme_main_command() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.splitlines()[0].split("#", 1)[0].strip()


def test_the_notebooks_job_runs_the_readme_main_command_and_keeps_its_outputs_on_failure():
    data = workflow(NOTEBOOKS)
    assert set(data["on"]) == {"push", "pull_request", "workflow_dispatch"}
    assert set(data["on"]["workflow_dispatch"]["inputs"]) == {"profile", "set"}
    (job,) = data["jobs"].values()
    assert job["env"]["SET"] == "${{ inputs.set }}" and "inputs.profile" in job["env"]["PROFILE"]
    runs = [step.get("run", "").strip() for step in job["steps"]]
    assert readme_main_command() in runs  # `make run`, with SET and PROFILE from the environment
    upload = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert set(upload["with"]["path"].split()) == {"reports/", "REPORT.md", "docs/report/", "reports-evidence/",
                                                   "figures/", "artifacts/"}
    summary = next(step for step in job["steps"] if "ci-summary" in step.get("run", ""))
    assert summary["if"] == "always()" and summary["continue-on-error"] is True  # never decides the job itself
    assert '>> "$GITHUB_STEP_SUMMARY"' in summary["run"]
    cached = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/cache/restore@"))
    assert {"~/.cache/pip", "~/.cache/eagle3lab", "~/.cache/huggingface"} == set(cached["with"]["path"].split())
    assert "hashFiles('requirements.txt'" in cached["with"]["key"] and "env.PROFILE" in cached["with"]["key"]


def test_the_canary_job_runs_make_canary_daily_and_on_dispatch():
    data = workflow(CANARY)
    assert set(data["on"]) == {"schedule", "workflow_dispatch"} and data["on"]["schedule"][0]["cron"]
    (job,) = data["jobs"].values()
    assert job["env"]["RELEASES"] == "${{ inputs.releases }}"
    assert "make canary" in [step.get("run", "").strip() for step in job["steps"]]
    uploads = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert [(u["if"], u["with"]["path"]) for u in uploads] == [("always()", "artifacts/canary/")]
    assert any("artifacts/canary/canary.md" in step.get("run", "") and "GITHUB_STEP_SUMMARY" in step["run"]
               for step in job["steps"])
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert '-m eagle3lab canary --newest --releases "$$RELEASES"' in makefile


def test_the_gitlab_example_runs_the_same_two_jobs():
    data = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))
    assert "make run" in data["notebooks"]["script"] and "make canary" in data["canary"]["script"]
    for name in ("notebooks", "canary"):
        job = data[name]
        assert job["artifacts"]["when"] == "always" and job["timeout"]
        assert not any("$SET" in line or "$RELEASES" in line or "$PROFILE" in line for line in job["script"])
