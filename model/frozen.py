"""A faster ``__init__`` for the frozen values built at every step.

``@dataclass(frozen=True, slots=True)`` writes each field in ``__init__`` as
``object.__setattr__(self, name, value)``: a global lookup, an attribute
lookup and the generic attribute protocol per field, ~9 % of a sweep's time
spread over the values a step builds (steps, events, receipts, the model's
states and logs). :func:`fast_init` gives such a class an ``__init__`` with
the same signature that stores each field through its slot's descriptor
(``Class.field.__set__``, looked up once), ~1.7x faster; a class of three
fields or more is instead built by a ``__new__`` with that signature, as its
twin (:func:`_twin`: the same slots, plain attribute stores) turned into
itself before ``__new__`` returns (its ``__init__`` is ``object``'s), another
1.1-2x (instructions by callgrind). Everything else the dataclass made stays:
the class is still frozen (assignment raises ``FrozenInstanceError``), and
equality, hashing, ``repr`` and ``dataclasses.replace`` are the dataclass's
own; copy and pickle pass the fields to ``__new__`` (``__getnewargs__``). A
subclass of a class built in ``__new__`` is built as before (its fields
stored by its own ``__init__``).

Only plain fields are taken (defaults and default factories included); a
class with ``__post_init__``, ``InitVar``, keyword-only or ``init=False``
fields is refused rather than half-served.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter
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
    twin = _twin(cls) if len(names) >= TWIN_FIELDS else None
    init_source = _function("__init__", args, [*body, *stores])
    exec(init_source, namespace)  # noqa: S102 (generated from field names only, as dataclasses does)
    init = namespace["__init__"]
    old = cls.__dict__["__init__"]
    init.__qualname__ = old.__qualname__
    init.__annotations__ = dict(old.__annotations__)
    init.__doc__ = old.__doc__
    init.__module__ = cls.__module__
    if twin is None:
        setattr(cls, "__init__", init)  # noqa: B010 (mypy: assigning to a method)
        return cls
    # Built in __new__ as the twin: the instance is never a frozen one
    # before its fields are stored, so it is not turned into a twin first.
    namespace.update(_cls=cls, _twin=twin, _new=object.__new__, _subclass_new=_subclass_new)
    new_body = [
        *body,
        "if cls is not _cls:  # a subclass's own layout (see _subclass_new)",
        f"    return _subclass_new(cls, {', '.join(names)})",
        "self = _new(_twin)",
        *(f"self.{name} = {name}" for name in names),
        "self.__class__ = _cls",
        "return self",
    ]
    exec(_function("__new__", ["cls", *args[1:]], new_body), namespace)  # noqa: S102
    new = namespace["__new__"]
    new.__qualname__ = f"{cls.__qualname__}.__new__"
    new.__annotations__ = dict(old.__annotations__)
    new.__module__ = cls.__module__
    getter = attrgetter(*names)
    setattr(cls, "__new__", staticmethod(new))  # noqa: B010 (as a class body's __new__ is made)
    setattr(cls, "__init__", object.__init__)  # noqa: B010 (the fields are stored by __new__)
    setattr(cls, "_fields_init", init)  # noqa: B010 (a plain subclass's instance: below)
    # copy and pickle build an instance as cls.__new__(cls, *__getnewargs__()):
    # the fields, which __setstate__ then stores again.
    setattr(cls, "__getnewargs__", lambda self: getter(self))  # noqa: B010
    setattr(cls, "__init_subclass__", classmethod(_subclassed))  # noqa: B010
    return cls


def _function(name: str, args: list[str], body: list[str]) -> str:
    return f"def {name}({', '.join(args)}):\n" + "".join(f"    {b}\n" for b in body or ["pass"])


def _subclassed(sub: type[Any], /, **kwargs: Any) -> None:
    """A subclass of a class built in ``__new__`` gets a ``__new__`` of its
    own: one taking any arguments (a dataclass subclass has fields of its
    own), which its own ``__init__`` stores; a subclass without one (it
    inherits ``object.__init__``) has the frozen class's fields stored here."""
    setattr(sub, "__new__", staticmethod(_subclass_new))  # noqa: B010


def _subclass_new(cls: type[Any], *args: Any, **kwargs: Any) -> Any:
    self: Any = object.__new__(cls)
    if cls.__init__ is object.__init__:
        cls._fields_init(self, *args, **kwargs)
    return self


# From this many fields on, an instance is built in __new__ as its twin
# (below): its one class assignment costs about what two descriptor calls do
# (callgrind: 3 fields 3.1K instructions a value against 3.5K, 8 fields 3.7K
# against 7.6K; at 2 fields the descriptors are cheaper).
TWIN_FIELDS = 3


def _twin(cls: type) -> type | None:
    """A class with ``cls``'s layout whose instances take plain attribute
    stores (``object.__setattr__``, specialized by the interpreter), or None
    where Python refuses to move an instance between the two.

    ``__new__`` makes the new instance a twin, stores each field, and makes
    it a ``cls`` before anyone else sees it: the value is frozen from the
    moment it exists for its users. A twin subclasses ``cls``'s base (a
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
