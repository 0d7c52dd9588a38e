"""What class resolution answers: the inner-model options a wrapper holds (``Option``, ``Inner``), how each member is
satisfied (``MemberStatus``) and one class's report (``ClassReport``); what could not be evaluated is an ``Unknown``
with its reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Union
from eagle3lab.trace.modindex import ClassRef


SATISFIED = ("provided", "inherited", "delegated", "proxied")


@dataclass(frozen=True)
class Unknown:
    """An expression the resolver could not turn into a class, and why."""

    reason: str


Value = Union[ClassRef, Unknown]


@dataclass(frozen=True)
class Option:
    """One class the inner model can be (or an unresolved one), and the source that says so."""

    cls: Optional[ClassRef]
    how: str
    reason: str = ""

    def to_dict(self) -> dict:
        return {"class": self.cls.qualname if self.cls else None, "how": self.how, "reason": self.reason}


@dataclass
class Inner:
    """The inner language model of a wrapper: the attribute, its possible classes, the route to it."""

    attr: str
    options: list[Option]
    via: list[str] = field(default_factory=list)  # proxies passed on the way (``__getattr__ -> self.minicpmv``)
    owner: Optional[ClassRef] = None  # class whose code assigns ``self.<attr>`` (the patch goes there)

    @property
    def resolved(self) -> list[ClassRef]:
        seen: dict[str, ClassRef] = {}
        for opt in self.options:
            if opt.cls is not None:
                seen.setdefault(opt.cls.qualname, opt.cls)
        return list(seen.values())

    @property
    def unresolved(self) -> list[Option]:
        return [o for o in self.options if o.cls is None]


@dataclass
class MemberStatus:
    member: str
    status: str  # provided | inherited | delegated | proxied | unresolved | missing
    via: str = ""
    inner_has: Optional[bool] = None  # every resolved inner option has it (None: no inner model)
    inner_options: dict[str, bool] = field(default_factory=dict)  # per inner class: has it

    @property
    def gap(self) -> str:
        """``delegation gap`` (some inner option has it), ``real lack`` or '' when not missing."""
        if self.status != "missing":
            return ""
        return "delegation gap" if any(self.inner_options.values()) else "real lack"


@dataclass
class ClassReport:
    entry: str
    module: str
    resolution_order: list[str]
    nn_module_getattr: bool
    custom_getattr: list[str]
    inner_attr: str
    inner_class: str
    inner_options: list[dict] = field(default_factory=list)
    inner_via: list[str] = field(default_factory=list)
    members: dict[str, MemberStatus] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["members"] = {k: {**asdict(v), "gap": v.gap} for k, v in self.members.items()}
        return data


def as_dict(status: MemberStatus) -> dict:
    return {**asdict(status), "gap": status.gap}
