"""``model.frozen.fast_init``: the faster ``__init__`` changes nothing a
value's user can see (``model/frozen.py``)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from inboxsim.model import Event, Prompt, State
from inboxsim.model.frozen import fast_init
from inboxsim.model.store import Store
from inboxsim.model.values import Receipt
from inboxsim.trace.record import NOTHING, Observed, Step


def _twin(with_fast: bool) -> Any:
    @dataclass(frozen=True, slots=True)
    class Value:
        a: int
        b: str = "b"
        c: dict[str, int] = field(default_factory=dict)

    return fast_init(Value) if with_fast else Value


def test_the_same_value_as_the_dataclass_builds() -> None:
    fast, plain = _twin(True), _twin(False)
    for args, kwargs in (((1,), {}), ((1, "x"), {}), ((1,), {"c": {"k": 2}}), ((), {"a": 3})):
        got, want = fast(*args, **kwargs), plain(*args, **kwargs)
        assert dataclasses.astuple(got) == dataclasses.astuple(want)
        assert repr(got).replace("fast", "") == repr(want).replace("fast", "")
    assert fast(1).c is not fast(1).c  # a fresh default per value, as the factory says
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        fast()
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        fast(1, z=2)
    assert list(inspect.signature(fast).parameters) == ["a", "b", "c"]


def test_the_model_values_stay_frozen_equal_hashable_and_picklable() -> None:
    event = Event("s", 1, "admitted", 5, "in-1", "{}")
    step = Step(0, "safety", "request", "prompt", Prompt(5, session="s"), None, None, NOTHING)
    receipt = Receipt("in-1", "s", "user", "{}", "steer", 1, 5)
    for value in (event, step, receipt, Observed(events=(event,))):
        assert pickle.loads(pickle.dumps(value)) == value
        assert hash(dataclasses.replace(value)) == hash(value)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, 0)
    assert Prompt(5, session="s", input="in-1") == Prompt(now=5, session="s", input="in-1")
    assert Prompt(5).text == "" and Prompt(5).session == ""


def test_refuses_what_it_would_not_serve() -> None:
    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    for cls in (Checked, Mutable, KeywordOnly):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
    assert State.__new__.__qualname__ == "State.__new__"  # wide: built in __new__
    assert Store.__init__.__qualname__ == "Store.__init__"  # two fields: in __init__


def test_a_value_built_through_its_twin_is_the_dataclass_value() -> None:
    """From ``TWIN_FIELDS`` fields on an instance is built in ``__new__`` as a
    twin class and turned into the frozen one; what a user sees is the frozen
    class's value (copied and pickled too), and a subclass's instance (another
    layout), plain or a dataclass with fields of its own, gets every field."""

    def make(with_fast: bool) -> Any:
        @dataclass(frozen=True, slots=True)
        class Wide:
            a: int
            b: str
            c: int
            d: str
            e: tuple[int, ...] = ()
            f: dict[str, int] = field(default_factory=dict)

        return fast_init(Wide) if with_fast else Wide

    fast, plain = make(True), make(False)
    assert "_twin" in fast.__new__.__globals__  # this width takes the twin path
    value = fast(1, "b", 3, "d", f={"k": 1})
    assert type(value) is fast
    assert dataclasses.astuple(value) == dataclasses.astuple(plain(1, "b", 3, "d", f={"k": 1}))
    assert value == fast(1, "b", 3, "d", (), {"k": 1}) and value != fast(2, "b", 3, "d")
    assert copy.copy(value) == value and copy.deepcopy(value) == value
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del value.b  # type: ignore[misc]

    class Sub(fast):  # type: ignore[valid-type, misc]
        pass  # a __dict__: a layout its twin does not share

    sub = Sub(1, "b", 3, "d")
    assert type(sub) is Sub and dataclasses.astuple(sub) == (1, "b", 3, "d", (), {})
    # (A local class does not pickle; copy takes pickle's path: __reduce_ex__.)
    assert type(copy.copy(sub)) is Sub
    assert dataclasses.astuple(copy.deepcopy(sub)) == dataclasses.astuple(sub)

    @dataclass(frozen=True, slots=True)
    class Wider(fast):  # type: ignore[valid-type, misc]
        g: int = 7

    wider = Wider(1, "b", 3, "d", g=8)
    assert type(wider) is Wider and dataclasses.astuple(wider) == (1, "b", 3, "d", (), {}, 8)
    assert copy.deepcopy(wider) == wider and copy.copy(wider) == wider
    assert fast_init(Wider)(1, "b", 3, "d", g=9).g == 9  # and made fast in turn
    prompt = Prompt(5, session="s", input="in-1", text="t", delivery="queue")
    assert type(prompt) is Prompt and (prompt.now, prompt.delivery) == (5, "queue")
    with pytest.raises(dataclasses.FrozenInstanceError):
        prompt.now = 6  # type: ignore[misc]
