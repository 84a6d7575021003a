"""The base of every stored record model: it dumps the keys it was given (and
`schema_version` always), so a record read from disk writes back as the file held it, and
its reader names the field of a damaged file."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from evals.errors import UserError
from evals.text_hygiene import one_line

# NaN stays NaN in the dump (a degenerate task's p-value), as json.dumps writes it
RECORD_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
PART_CONFIG = RECORD_CONFIG
"""The parts of a record (its nested models) reject unknown keys like the record."""

_Record = TypeVar("_Record", bound="StoredRecord")


class StoredRecord(BaseModel):
    """A record that dumps the keys it was given, with its `schema_version` always (a part
    whose version is optional only when it has one)."""

    @classmethod
    def from_stored(cls: type[_Record], data: dict, where: object) -> _Record:
        """The record in `data` (already at the current version); a UserError naming `where`
        and up to three fields when a field has the wrong shape."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(one_line(f"`{'.'.join(map(str, e['loc']))}`: {e['msg']}")
                                 for e in exc.errors()[:3])
            raise UserError(f"{where}: a field has an unexpected shape ({problems}); the file "
                            "was damaged or written by something else. Rerun the command "
                            "that wrote it.") from None

    @model_serializer(mode="wrap")
    def _given_keys(self, handler) -> dict[str, object]:
        data = handler(self)
        fields = type(self).model_fields
        given = {(fields[name].serialization_alias if name in fields else None) or name
                 for name in self.model_fields_set}  # with extra="allow", extras are given
        return {k: v for k, v in data.items()
                if k in given or (k == "schema_version" and v is not None)}
