"""What every sidecar and every record in one shares: the schema version, the run's identity, typed records."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar
from pydantic import BaseModel, ConfigDict, Field


SCHEMA_VERSION = 3  # 3: raw memory and seconds in 01, typed audit counts and fix checks in 02


class Record(BaseModel):
    """A nested part of a sidecar: typed where readers use it, open to extra keys a newer stage adds."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)


class Sidecar(BaseModel):
    """What every notebook records: which run this was, with which parameters, on which machine."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    NOTEBOOK: ClassVar[str] = ""

    schema_version: int = SCHEMA_VERSION
    notebook: str = ""
    profile: str
    written_at: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        if not self.notebook:
            self.notebook = self.NOTEBOOK
        if not self.written_at:
            self.written_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

    @property
    def date(self) -> str:
        """The UTC date of the run, for "[measured] here, <date>" labels."""
        return self.written_at[:10]
