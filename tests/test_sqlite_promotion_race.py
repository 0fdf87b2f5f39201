"""A boundary's batch against a revert that ends a row's lifecycle and a
retry of its ID that admits it again, on the SQLite inbox (free-running seed
486 of ``conformance --target sqlite --concurrency 4``): the boundary read u
("a") pending; a prompt u ("b") committed the staged revert, which truncated
u, and admitted u again; the boundary's promotion then took the new row out
but wrote the message from the row it had read, so the transcript kept "a"'s
admission record and a later retry of u was judged against it."""

from __future__ import annotations

from pathlib import Path

from inboxsim.conformance.catalogue import mutant_command
from inboxsim.model import G4, Answer, Create, Prompt, RevertStage
from inboxsim.search.groups import GroupDriver
from inboxsim.targets.adapter import AdapterTarget


def _race(folder: Path, schedule: list[int]) -> tuple[bool, str]:
    """The scene, then the group [answer, prompt u "b"] under ``schedule``,
    then retries of u with each text: are all legal?"""
    with AdapterTarget(mutant_command(None)[0], folder, 4) as target:
        driver = GroupDriver(target, G4, 4)
        for op in [
            Create(1, session="s1"),
            Prompt(2, session="s1", input="p1", text="go"),
            Prompt(3, session="s1", input="u", text="a"),
            RevertStage(4, session="s1", message="p1"),
        ]:
            assert driver.run([op]).legal
        call = driver.state.runs["s1"].call.call
        group = driver.run(
            [Answer(5, call=call, finish="stop"), Prompt(5, session="s1", input="u", text="b")],
            schedule,
        )
        if not group.legal:
            return False, group.explain()
        for text in ("a", "b"):
            retry = driver.run([Prompt(6, session="s1", input="u", text=text)])
            if not retry.legal:
                return False, retry.explain()
        return True, ""


# The answer's runner reads the boundary's batch, the prompt's transaction
# commits the revert and admits u again, then the promotion's transaction.
RACE = [1, 0, 0, 0, 0, 1] + [0] * 6


def test_a_promotion_writes_the_message_of_the_row_it_takes_out(tmp_path: Path) -> None:
    legal, why = _race(tmp_path, RACE)
    assert legal, why
