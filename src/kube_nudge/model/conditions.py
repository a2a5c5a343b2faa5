"""An analysis metric's ``successCondition`` and ``failureCondition``, in CEL (the Common
Expression Language Kubernetes itself uses for validation rules and admission policies),
evaluated by cel-python, never by a parser of our own.

``result`` is bound as Argo Rollouts binds it: the list of the values of an instant
vector (``result[0] < 0.05``), or the number a scalar query returns. Argo evaluates with
the expr language, whose ``len(result)`` is CEL's ``size(result)``; ``isNaN(x)`` and
``isInf(x)``, which Argo's templates use for empty or undefined ratios, are added.

A condition is compiled once, when its template is read: one that doesn't compile refuses
the template (``ConditionError``, one line naming the condition). An evaluation error (an
index past an empty vector, a result that isn't a boolean) is the measurement's Error, as
in Argo. cel-python is imported on first use: ``kube-nudge run`` without analysis, and
every other command, never load it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Condition", "ConditionError", "MeasuredValue", "compile_condition"]

MeasuredValue = float | Sequence[float]
"""What a query measured: a scalar, or the values of an instant vector."""

_MAX_CHARS = 1024


class ConditionError(ValueError):
    """A condition that doesn't compile, or an evaluation that fails (one line, no value)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A compiled condition and its text."""

    text: str
    _program: Any = field(repr=False, compare=False)

    def holds(self, result: MeasuredValue) -> bool:
        """Whether the condition is true of ``result``; ``ConditionError`` when it can't be
        evaluated or isn't a boolean."""
        celpy, celtypes = _cel()
        try:
            value = self._program.evaluate({"result": _bound(result, celtypes)})
        except celpy.CELEvalError as exc:
            raise ConditionError(f"{self.text!r} failed: {_first_line(exc)}") from None
        if isinstance(value, celpy.CELEvalError):
            raise ConditionError(f"{self.text!r} failed: {_first_line(value)}")
        if not isinstance(value, celtypes.BoolType | bool):
            raise ConditionError(f"{self.text!r} is not a boolean")
        return bool(value)


def compile_condition(text: str) -> Condition:
    """``text`` compiled, or ``ConditionError`` saying why (one line)."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("a condition must be a non-empty string")
    if len(text) > _MAX_CHARS:
        raise ConditionError(f"a condition is at most {_MAX_CHARS} characters")
    celpy, _ = _cel()
    environment = _environment()
    try:
        program = environment.program(environment.compile(text), functions=_FUNCTIONS)
    except celpy.CELParseError as exc:
        where = f"column {exc.column}" if getattr(exc, "column", None) else "somewhere"
        raise ConditionError(f"{text!r} is not CEL: a syntax error at {where}") from None
    return Condition(text, program)


@functools.cache
def _cel() -> tuple[Any, Any]:
    import celpy
    from celpy import celtypes

    return celpy, celtypes


@functools.cache
def _environment() -> Any:
    celpy, _ = _cel()
    return celpy.Environment()


def _is_nan(value: Any) -> Any:
    _, celtypes = _cel()
    return celtypes.BoolType(isinstance(value, float) and math.isnan(value))


def _is_inf(value: Any) -> Any:
    _, celtypes = _cel()
    return celtypes.BoolType(isinstance(value, float) and math.isinf(value))


_FUNCTIONS = {"isNaN": _is_nan, "isInf": _is_inf}


def _bound(result: MeasuredValue, celtypes: Any) -> Any:
    if isinstance(result, int | float):
        return celtypes.DoubleType(float(result))
    return celtypes.ListType([celtypes.DoubleType(float(v)) for v in result])


def _first_line(exc: BaseException) -> str:
    """cel-python's message, cut before the activation dump it appends."""
    text = str(exc.args[0] if exc.args else exc).splitlines()[0]
    return text.split(" (in activation", 1)[0][:200]
