"""Where a sidecar lives, and writing and reading one: validated before it replaces anything, refused in one line
(with the command that rewrites it) when missing, unreadable, of another schema version, off its schema, written for
another profile, or changed after the run wrote it.

Why the last two: REPORT.md labels a sidecar's numbers "[measured] here". A sidecar copied over from another profile
(``03_patch_and_bench.gpu.json`` saved as ``...cpu.json``) rendered the gpu numbers into the cpu report, and a number
edited by hand went into REPORT.md unnoticed. So every sidecar is read only for the profile its body names, and
``write`` stores ``content_sha256``: the sha256 of the canonical JSON (sorted keys, no spaces) of everything else in
the file, checked by ``read``. It is a file-level key, not a field of the schemas: a sidecar read back equals the
one written. A sidecar from before digests has none; it is read (``has_digest`` says so, and the report notes it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any, Optional, TypeVar
from pydantic import ValidationError
from eagle3lab.atomic import json_text, write_json_atomic
from eagle3lab.errors import SidecarError
from eagle3lab.paths import sidecar_dir
from eagle3lab.sidecars.base import SCHEMA_VERSION, Sidecar
from eagle3lab.sidecars.crash_repro import CrashReproSidecar
from eagle3lab.sidecars.interface_trace import InterfaceTraceSidecar
from eagle3lab.sidecars.patch_bench import PatchBenchSidecar
from eagle3lab.sidecars.vllm_same_class import VllmSameClassSidecar


S = TypeVar("S", bound=Sidecar)


SCHEMAS: tuple[type[Sidecar], ...] = (CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar,
                                      VllmSameClassSidecar)


def today() -> str:
    """The UTC date every measured figure is labelled with."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def sidecar_path(notebook: str, profile: str) -> Path:
    """``artifacts/<notebook>.<profile>.json`` (in a staged run, its staging folder: ``eagle3lab.staging``)."""
    return sidecar_dir() / f"{notebook}.{profile}.json"


DIGEST_KEY = "content_sha256"


def content_digest(data: dict[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of a sidecar's body, its own digest left out."""
    body = {key: value for key, value in data.items() if key != DIGEST_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(sidecar: Sidecar) -> Path:
    """Validate (a wrong field is a bug in the notebook, caught before anything is replaced), then write, with the
    digest of the body as it will read back from disk."""
    checked = type(sidecar).model_validate(sidecar.model_dump())
    body = json.loads(json_text(checked.model_dump(mode="json")))
    return write_json_atomic(sidecar_path(checked.notebook, checked.profile), {**body, DIGEST_KEY: content_digest(body)})


def has_digest(path: Path) -> bool:
    """Whether the sidecar at ``path`` records a content digest (sidecars written before digests do not)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and DIGEST_KEY in data


def _rerun_hint(schema: type[Sidecar], profile: str) -> str:
    number = schema.NOTEBOOK.split("_", 1)[0]
    return f"rerun it: python -m eagle3lab run --profile {profile} --notebooks {number}"


def read(schema: type[S], profile: str, path: Path | None = None) -> S:
    """The typed sidecar of ``schema``'s notebook for ``profile``; one clear line if it is missing or unusable."""
    path = Path(path) if path is not None else sidecar_path(schema.NOTEBOOK, profile)
    hint = _rerun_hint(schema, profile)
    fields = {"path": path, "notebook": schema.NOTEBOOK, "profile": profile}
    if not path.is_file():
        raise SidecarError(f"sidecar {path} is missing (notebook {schema.NOTEBOOK} has not run on '{profile}'); "
                           f"{hint}", **fields)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"sidecar {path} is unreadable ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
                           f"{hint}", **fields) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise SidecarError(f"sidecar {path} has schema version {version}, this eagle3lab reads {SCHEMA_VERSION}; "
                           f"{hint}", version=version, expected=SCHEMA_VERSION, **fields)
    recorded = data.pop(DIGEST_KEY, None)
    try:
        sidecar = schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SidecarError(f"sidecar {path} does not match its schema at '{where}': {first['msg']}; "
                           f"{hint}", location=where, **fields) from None
    if sidecar.profile != profile:
        raise SidecarError(f"sidecar {path} was written for profile '{sidecar.profile}', not for '{profile}' (the "
                           f"profile asked for); {hint}", problem="other_profile", found=sidecar.profile, **fields)
    if recorded is not None and recorded != content_digest(data):
        raise SidecarError(f"sidecar {path} was changed after the run wrote it (its content no longer matches the "
                           f"sha256 the run recorded); {hint}, or put back the file the run wrote",
                           problem="changed", **fields)
    return sidecar


def read_if_present(schema: type[S], profile: str) -> Optional[S]:
    """Like ``read``, but a sidecar that was never written is ``None`` (a notebook that did not run)."""
    if not sidecar_path(schema.NOTEBOOK, profile).is_file():
        return None
    return read(schema, profile)
