"""Per-release facts the trace derives from the runtime, cached on disk so a warm preflight takes seconds.

Tracing the runtime (every model runner, graph runner and speculative worker) and walking the start-up order
costs seconds per release, yet depends only on the release and on this package's trace code. The result (the
EAGLE-path sites, the start-up order per profile, the model registry) is stored as JSON under the cache, keyed by
the release, the wheel's name and size (or the installed copy's modified files), and a hash of the trace code,
so a change to either recomputes it. Synthetic sources (tests) are never cached.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Optional

from eagle3lab.atomic import write_json_atomic
from eagle3lab.paths import cache_dir
from eagle3lab.trace import contract as contract_mod
from eagle3lab.trace.modindex import ModuleIndex
from eagle3lab.trace.registry import draft_only_architectures, registrations
from eagle3lab.trace.sources import SglangSource
from eagle3lab.trace.startup import StartupProfile, startup_order

FORMAT = 1
_CODE = ("contract.py", "startup.py", "registry.py", "modindex.py", "facts.py", "sources.py")
_SITE_FIELDS = {f.name for f in fields(contract_mod.Site)}


@dataclass
class ReleaseFacts:
    """What the trace knows about one release's runtime, independent of any model class."""

    version: str
    origin: str
    sites: list[contract_mod.Site]  # model-object sites on EAGLE paths (target and draft)
    startup: dict[str, list[dict]]  # profile name -> start-up order of the sites
    registry: dict[str, dict]  # architecture -> {"file", "module", "class"}
    draft_only: list[str]
    cached: bool = False  # read from the disk cache (True) or computed now

    def to_dict(self) -> dict:
        data = asdict(self)
        data["sites"] = [asdict(s) for s in self.sites]
        data.pop("cached")
        return {"format": FORMAT, **data}

    @classmethod
    def from_dict(cls, data: dict) -> "ReleaseFacts":
        sites = []
        for raw in data["sites"]:
            site = contract_mod.Site(**{k: v for k, v in raw.items() if k in _SITE_FIELDS})
            site.runs_when = [contract_mod.RunCondition(v) for v in site.runs_when]
            sites.append(site)
        return cls(data["version"], data["origin"], sites, data["startup"], data["registry"], data["draft_only"],
                   cached=True)


def _code_hash() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in _CODE:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:12]


def _cache_key(src: SglangSource) -> Optional[str]:
    """None for sources that are not a wheel or an installed package (nothing stable to key on)."""
    origin = Path(src.origin)
    if src.origin.endswith(".whl") and origin.is_file():
        where = f"{origin.name}:{origin.stat().st_size}"
    elif (origin / "__init__.py").is_file():
        where = "installed:" + ",".join(src.modified)
    else:
        return None
    raw = f"{FORMAT}|{src.version}|{where}|{_code_hash()}"
    return f"{src.version}-{hashlib.sha256(raw.encode()).hexdigest()[:16]}"


def compute(src: SglangSource, index: Optional[ModuleIndex] = None) -> ReleaseFacts:
    """Trace the release now (seconds)."""
    sites = contract_mod.contract(contract_mod.trace(src))
    index = index or ModuleIndex(src)
    startup = {p.name: startup_order(src, sites, p) for p in (StartupProfile.cpu(), StartupProfile.gpu())}
    registry = {arch: {"file": reg.file, "module": reg.ref.module, "class": reg.ref.name}
                for arch, reg in registrations(index).items() if not reg.ref.external}
    return ReleaseFacts(src.version, src.origin, sites, startup, registry, sorted(draft_only_architectures(src)))


_ATTR = "_eagle3lab_release_facts"


def release_facts(src: SglangSource) -> ReleaseFacts:
    """The facts of ``src``: from memory (kept on the source object), from the disk cache, or computed and cached."""
    known = getattr(src, _ATTR, None)
    if known is not None:
        return known
    key = _cache_key(src)
    path = cache_dir("trace-facts") / f"{key}.json" if key else None
    facts = None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            facts = ReleaseFacts.from_dict(data) if data.get("format") == FORMAT else None
        except (OSError, ValueError, KeyError, TypeError):
            facts = None  # a damaged cache entry is recomputed, never trusted
    if facts is None:
        facts = compute(src)
        if path is not None:
            write_json_atomic(path, facts.to_dict())
    setattr(src, _ATTR, facts)
    return facts


def startup(src: SglangSource, profile: StartupProfile) -> list[dict]:
    """Start-up order of the EAGLE-path sites under ``profile`` (cached for the cpu and gpu profiles)."""
    facts = release_facts(src)
    if profile.name in facts.startup and profile in (StartupProfile.cpu(), StartupProfile.gpu()):
        return facts.startup[profile.name]
    return startup_order(src, facts.sites, profile)
