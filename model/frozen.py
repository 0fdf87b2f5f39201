"""A faster ``__init__`` for the frozen values built at every step.

``@dataclass(frozen=True, slots=True)`` writes each field in ``__init__`` as
``object.__setattr__(self, name, value)``: a global lookup, an attribute
lookup and the generic attribute protocol per field, ~9 % of a sweep's time
spread over the values a step builds (steps, events, receipts, the model's
states and logs). :func:`fast_init` gives such a class an ``__init__`` with
the same signature that stores each field through its slot's descriptor
(``Class.field.__set__``, looked up once), ~1.7x faster; a class of five
fields or more is built as its twin (:func:`_twin`: the same slots, plain
attribute stores) and turned back into itself before ``__init__`` returns,
another 1.1-1.5x (steps, requests, events, receipts: instructions by
callgrind). Everything else the dataclass made stays: the class is still frozen (assignment raises
``FrozenInstanceError``), and equality, hashing, ``repr``, pickling and
``dataclasses.replace`` are the dataclass's own.

Only plain fields are taken (defaults and default factories included); a
class with ``__post_init__``, ``InitVar``, keyword-only or ``init=False``
fields is refused rather than half-served.
"""

from __future__ import annotations

import dataclasses
from types import MemberDescriptorType
from typing import Any, TypeVar, cast

T = TypeVar("T")

_FACTORY = object()  # the default of a field with a default factory (as dataclasses does)


def fast_init(cls: type[T]) -> type[T]:
    """Replace the dataclass ``cls``'s ``__init__`` (see the module docstring)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: fast_init takes a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init does not run __post_init__")
    names: list[str] = []
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    args, body = ["self"], []
    for f in dataclasses.fields(cast(Any, cls)):
        if not f.init or f.kw_only or f.name.startswith("_"):
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init takes plain fields only")
        names.append(f.name)
        slot = getattr(cls, f.name)  # the slot's descriptor, here or in a base class
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{f.name}: fast_init needs a slot")
        namespace[f"_set_{f.name}"] = slot.__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_FACTORY")
            body.append(f"if {f.name} is _FACTORY: {f.name} = _factory_{f.name}()")
        else:
            args.append(f.name)
    stores = [f"_set_{name}(self, {name})" for name in names]
    twin = _twin(cls) if len(names) >= SWAP_FIELDS else None
    if twin is None:
        body.extend(stores)
    else:
        namespace.update(_type=type, _cls=cls, _twin=twin, _become=object.__setattr__)
        body.append("if _type(self) is _cls:")
        body.append("    _become(self, '__class__', _twin)")
        body.extend(f"    self.{name} = {name}" for name in names)
        body.append("    self.__class__ = _cls")
        body.append("else:  # a subclass's instance: its own layout")
        body.extend(f"    {store}" for store in stores)
    source = f"def __init__({', '.join(args)}):\n" + "".join(f"    {b}\n" for b in body or ["pass"])
    exec(source, namespace)  # noqa: S102 (generated from field names only, as dataclasses does)
    init = namespace["__init__"]
    old = cls.__dict__["__init__"]
    init.__qualname__ = old.__qualname__
    init.__annotations__ = dict(old.__annotations__)
    init.__doc__ = old.__doc__
    init.__module__ = cls.__module__
    setattr(cls, "__init__", init)  # noqa: B010 (mypy: assigning to a method)
    return cls


# From this many fields on, an instance is built as its twin (below): the two
# class assignments cost about what four descriptor calls do (callgrind).
SWAP_FIELDS = 5


def _twin(cls: type) -> type | None:
    """A class with ``cls``'s layout whose instances take plain attribute
    stores (``object.__setattr__``, specialized by the interpreter), or None
    where Python refuses to move an instance between the two.

    ``__init__`` makes the new instance a twin, stores each field, and makes
    it a ``cls`` again before anyone else sees it: the value is frozen from
    the moment it exists for its users. A twin subclasses ``cls``'s base (a
    frozen dataclass with slots of its own, for the operations) so that the
    two differ only in the class that holds the same slots.
    """
    base = cls.__base__ or object
    twin = type(
        f"{cls.__name__}Twin",
        (base,),
        {
            "__slots__": cls.__dict__["__slots__"],
            # Both, or the frozen base's __delattr__ keeps attribute stores generic.
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
        },
    )
    try:  # Python's own check that the layouts agree (compatible_for_assignment)
        probe: Any = object.__new__(cls)
        object.__setattr__(probe, "__class__", twin)
        probe.__class__ = cls
    except TypeError:
        return None
    return twin
