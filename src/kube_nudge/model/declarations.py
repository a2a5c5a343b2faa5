"""The shape of one declaration of the annotation contract (`model/annotations.py` declares
each annotation once with it): its name, what it goes on, who writes it, what it accepts,
its default and one line of documentation. README's table, `kube-nudge annotations` and the
parsing of a workload's and a source's settings are all read from the declarations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kube_nudge.model.annotations import WorkloadDefaults

__all__ = ["Annotation", "By", "On", "ParseContext", "Parser"]

#: `(annotation name, stripped value) -> value`; raises ValueError with a readable message.
Parser = Callable[[str, str], Any]


class On(StrEnum):
    """The object an annotation (or label) goes on."""

    WORKLOAD = "workload"
    WORKLOAD_METADATA = "workload metadata"
    POD_TEMPLATE = "pod template"
    SOURCE = "ConfigMap/Secret"
    POD = "pods"
    COPY = "copies"
    """ConfigMaps/Secrets a strategy makes as copies of sources."""


class By(StrEnum):
    """Who writes an annotation."""

    USER = "user"
    CONTROLLER = "kube-nudge"
    AGENT = "kube-nudge agent"


@dataclass(frozen=True, slots=True)
class ParseContext:
    """What a parser may need besides the value: the workload's namespace, the flags."""

    namespace: str
    defaults: WorkloadDefaults


@dataclass(frozen=True, slots=True)
class Annotation:
    """One annotation (or label) of the contract, declared once."""

    name: str
    on: On
    by: By
    doc: str
    """One line: what it means."""
    values: str = ""
    """What it accepts, with its range (the table's "Values")."""
    shown_default: str = ""
    """The default as a user reads it (the table's "Default")."""
    field: str | tuple[str, ...] = ""
    """The settings attribute(s) the parsed value goes to; "" for one kube-nudge only writes
    or reads elsewhere. A tuple takes a tuple value, one item per attribute."""
    parse: Parser | None = None
    parse_in: Callable[[ParseContext], Parser] | None = None
    """A parser that needs the namespace or the flags (instead of `parse`)."""
    default: Any = None
    default_from: Callable[[WorkloadDefaults], Any] | None = None
    """The default taken from the flags (instead of `default`)."""
    label: bool = False
    """A label, not an annotation (on copies)."""

    def parser(self, context: ParseContext) -> Parser:
        """The parser of this annotation's value in `context`."""
        if self.parse_in is not None:
            return self.parse_in(context)
        if self.parse is None:
            raise ValueError(f"{self.name} is not parsed into settings")
        return self.parse

    def default_in(self, context: ParseContext) -> Any:
        """The value an unset or invalid annotation stands for in `context`."""
        if self.default_from is not None:
            return self.default_from(context.defaults)
        return self.default
