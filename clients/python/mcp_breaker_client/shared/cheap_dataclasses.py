"""Cheaper constructors for the dataclasses built per span: the events, readings, signals
and decisions. Python's own cost more than the work around them on the hot path:

- a frozen dataclass's ``__init__`` calls ``object.__setattr__`` per field (the class
  refuses plain assignment): ``slot_init`` gives it one that fills each slot through its
  descriptor, with the same parameters, defaults, errors and instance;
- calling a class with keyword arguments gathers them into a dict on every call:
  ``builder`` makes a plain function that builds the same instance from the same
  arguments, for the few call sites that build one per span.

Both write their functions as source and compile it, as ``dataclasses`` itself does.
tests/test_classify_events.py, test_classify_shortcuts.py and test_engines_breaker.py hold
them to a dataclass's promises (frozen, equality, hash, pickling, replace, defaults,
keyword-only, missing and unknown arguments).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

_T = TypeVar("_T")


def slot_init(cls: type[_T]) -> type[_T]:
    """A frozen, slotted dataclass's ``__init__``, remade to fill each slot through its
    descriptor. The one dataclasses writes calls ``object.__setattr__`` per field (frozen
    classes refuse plain assignment), which makes an event cost some 60% more to build, and
    one is built per call and listing. Same parameters, defaults, errors and instance.
    """
    namespace: dict[str, Any] = {}
    parameters, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a default factory is not supported")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is MISSING:
            parameters.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            parameters.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, *, {', '.join(parameters)}):\n" + "\n".join(body)
    exec(source, namespace)
    init = namespace["__init__"]
    generated = cls.__init__
    init.__qualname__ = generated.__qualname__
    init.__annotations__ = generated.__annotations__
    setattr(cls, "__init__", init)  # noqa: B010  (mypy will not have a method assigned)
    return cls


def builder(cls: type[_T]) -> Callable[..., _T]:
    """A function that builds a slotted dataclass from the keyword arguments its constructor
    takes, for the objects built per MCP span. It costs about half as much as calling the
    class: a class called with keyword arguments gathers them into a dict on every call
    (``tp_init`` takes one), a function does not. Same fields, defaults (a default factory
    is called per object, as the constructor calls it), errors for a missing or unknown
    argument, and instance: the constructor stays as it is for everyone else.
    """
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: __post_init__ is not supported")
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_MISSING": MISSING}
    parameters, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        value = f.name
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            parameters.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            parameters.append(f"{f.name}=_MISSING")
            value = f"_factory_{f.name}() if {f.name} is _MISSING else {f.name}"
        else:
            parameters.append(f.name)
        if frozen:  # past the frozen class's __setattr__, through the slot itself
            namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
            body.append(f"    _set_{f.name}(self, {value})")
        else:
            body.append(f"    self.{f.name} = {value}")
    source = (
        f"def build(*, {', '.join(parameters)}):\n    self = _new(_cls)\n"
        + "\n".join(body)
        + "\n    return self"
    )
    exec(source, namespace)
    build: Callable[..., _T] = namespace["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build
