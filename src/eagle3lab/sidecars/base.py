"""What every sidecar and every record in one shares: the schema version, the run's identity, typed records."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar, Optional
from pydantic import BaseModel, ConfigDict, Field, JsonValue, SerializerFunctionWrapHandler, model_serializer


SCHEMA_VERSION = 3  # 3: raw memory and seconds in 01, typed audit counts and fix checks in 02


#: A JSON object whose keys are not the project's own: a notebook's papermill parameters, a profile's values as
#: loaded, a check's evidence. Only where the keys are open-ended; every key this project names has a record.
JsonObject = dict[str, JsonValue]
_ABSENT = object()


class Record(BaseModel):
    """A nested part of a sidecar, typed field by field. Extra keys are refused: a misspelt optional key used to
    be kept beside the real one, and the reader saw the default. Fields that are keywords in Python (``class``)
    are aliased and written under their JSON name."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True, validate_assignment=True)

    def _given(self, key: str) -> Optional[str]:
        """The field a JSON key names (its alias or its name), if this record holds it."""
        for name, field in type(self).model_fields.items():
            if key in (name, field.alias):
                return name
        return None

    def __getitem__(self, key: str) -> Any:
        """Read by JSON key, as these records were read when they were dictionaries. A bridge, not the way in:
        code under ``trace/`` and ``fix/`` is hashed into the shipped release records and still reads some rows by
        key; new code reads attributes."""
        name = self._given(key)
        if name is None:
            raise KeyError(key)
        return getattr(self, name)

    def get(self, key: str, default: Any = None) -> Any:
        """``record[key]``, or ``default`` where the record does not hold ``key`` (see ``__getitem__``)."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _ABSENT) is not _ABSENT


class SparseRecord(Record):
    """A record whose producer leaves keys out where they do not apply (a bisect row of a release without the
    class, a raise site with no ``otherwise``): it writes back only the keys it was given, so a sidecar read and
    written again is the same file."""

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = handler(self)
        unset = {field.alias or name for name, field in type(self).model_fields.items()
                 if name not in self.model_fields_set}
        return {key: value for key, value in data.items() if key not in unset}

    def _given(self, key: str) -> Optional[str]:
        name = super()._given(key)
        return name if name in self.model_fields_set else None


class Sidecar(BaseModel):
    """What every notebook records: which run this was, with which parameters, on which machine."""

    # validate_assignment: a field set after construction (a partial sidecar, a test's variant) becomes its record
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_assignment=True)
    NOTEBOOK: ClassVar[str] = ""

    schema_version: int = SCHEMA_VERSION
    notebook: str = ""
    profile: str
    written_at: str = ""
    parameters: JsonObject = Field(default_factory=dict)  # the notebook's papermill parameters, as passed
    environment: dict[str, str] = Field(default_factory=dict)  # runtime.envinfo.environment_table

    def model_post_init(self, context: Any) -> None:
        if not self.notebook:
            self.notebook = self.NOTEBOOK
        if not self.written_at:
            self.written_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

    @property
    def date(self) -> str:
        """The UTC date of the run, for "[measured] here, <date>" labels."""
        return self.written_at[:10]
