"""A kill mid-group, as the linearizability search judges it: each member
in flight (its outcome unknown) took no effect, took effect up to one of the
model's crash points, or completed unseen, and the search chooses for each.
Hand-built histories: one where the unknown member must have taken no
effect, one where it must have taken effect, one where the kill must have
cut a boundary's batch (``mid_promotion``: the first promotion durable, the
rest not), and one that no choice explains.
"""

from __future__ import annotations

import json

from inboxsim.model import Event
from inboxsim.model.values import canonical_json
from inboxsim.search import Group, Illegal, Legal, Msg, Request, Row, Shown, Unknown, linearize
from tests.group_helpers import NOW, created
from tests.linearize_helpers import S1, ev, msg, prompt, receipt, row


def killed(*requests: Request, after: Shown) -> Group:
    return Group(created(S1), requests, {S1: after}, True)


def unknown(x: str) -> Request:
    return Request(prompt(x), 0, None, Unknown())


def judged(g: Group) -> Legal | Illegal:
    verdict = linearize(g)
    plain = linearize(g, memo=False)
    assert type(plain) is type(verdict)  # the plain search agrees
    assert isinstance(verdict, (Legal, Illegal))
    return verdict


def placed(verdict: Legal) -> set[int]:
    return {m.request for m in verdict.order if m.request is not None}


def test_an_unknown_member_that_left_no_trace_took_no_effect() -> None:
    g = killed(
        Request(prompt("a"), 0, 1, receipt("a", 0)),
        unknown("b"),
        after=Shown((row("a", 0),), (), events=(ev(0, "admitted", "a"),)),
    )
    verdict = judged(g)
    assert isinstance(verdict, Legal), verdict.explain(g)
    assert placed(verdict) == {0}  # b is not in the order: no effect
    assert verdict.order[-1].kill


def test_an_unknown_member_whose_admission_survived_took_effect() -> None:
    g = killed(
        Request(prompt("a"), 0, 1, receipt("a", 0)),
        unknown("b"),
        after=Shown(
            (row("a", 0), row("b", 1)), (), events=(ev(0, "admitted", "a"), ev(1, "admitted", "b"))
        ),
    )
    verdict = judged(g)
    assert isinstance(verdict, Legal), verdict.explain(g)
    assert placed(verdict) == {0, 1}


def _both_admitted(pending: Row, shown: Msg, promoted: str) -> Shown:
    """Steers a and b admitted, an execution started, one promotion logged."""
    log = (ev(0, "admitted", "a"), ev(1, "admitted", "b"), ev(2, "execution_started"))
    return Shown((pending,), (shown,), events=log + (ev(3, "promoted", promoted),))


def test_a_kill_inside_a_boundary_leaves_the_batch_cut_at_mid_promotion() -> None:
    """Both steers were admitted before the boundary (the log says so), so
    it promotes both at once; only a kill after its first promotion leaves
    b pending. No kill between two transitions gives this."""
    g = killed(unknown("a"), unknown("b"), after=_both_admitted(row("b", 1), msg("a", 3), "a"))
    verdict = judged(g)
    assert isinstance(verdict, Legal), verdict.explain(g)
    cut = verdict.order[-2]
    assert cut.step is not None and cut.crash_at == "mid_promotion"
    assert "died at mid_promotion" in verdict.explain(g)


def test_no_choice_of_effects_explains_a_batch_promoted_out_of_order() -> None:
    """b promoted while a, admitted before it, stays pending: no member's
    effect, no crash point, explains it (a boundary takes every steer in
    admission order, and a cut keeps the first)."""
    g = killed(unknown("a"), unknown("b"), after=_both_admitted(row("a", 0), msg("b", 3), "b"))
    verdict = judged(g)
    assert isinstance(verdict, Illegal)
    why = verdict.explain(g)
    assert "then the target was killed" in why and "died at" in why, why


def _admitted(seq: int, x: str, text: str) -> Event:
    """An admission as the SQLite inbox logs it: its payload in its data."""
    payload = {"data": {"text": text, "files": [], "agents": [], "metadata": {}}}
    return Event(
        S1,
        seq,
        "admitted",
        NOW,
        x,
        canonical_json({**payload, "delivery": "steer", "type": "user"}),
    )


def test_of_two_unknown_admissions_of_one_id_the_logged_payload_took_effect() -> None:
    """A conflicting retry racing an exact one, both in flight at the kill:
    the restarted target shows one admission of u, its log naming the text
    "z". Rows, transcript and folded events do not show a payload, so both
    members explain them; the order found admits the one the log names, so
    the model carries the payload the target keeps and a later retry of u
    is judged as the target judges it (seeds 730 and 924 of ``conformance
    --concurrency 4 --group-kills``: the first order found admitted the
    other text, and the correct inbox's answer to the retry was called a
    divergence). A log without payloads leaves the choice open."""
    a = Request(prompt("u", "a"), 0, None, Unknown())
    z = Request(prompt("u", "z"), 0, None, Unknown())
    verdict = judged(
        killed(a, z, after=Shown((row("u", 0),), (), events=(_admitted(0, "u", "z"),)))
    )
    assert isinstance(verdict, Legal)
    assert placed(verdict) == {1}
    (kept,) = verdict.state.store.sessions[S1].pending
    assert json.loads(kept.data)["text"] == "z"
    plain = judged(killed(a, z, after=Shown((row("u", 0),), (), events=(ev(0, "admitted", "u"),))))
    assert isinstance(plain, Legal) and len(placed(plain)) == 1
