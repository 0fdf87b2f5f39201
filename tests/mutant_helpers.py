"""A model mutant shared by the invariant tests and the explorer's tests."""

from __future__ import annotations

from typing import Any

import pytest

from inboxsim.model import inbox, store
from inboxsim.model.state import Tx


def ids_freed_for_everyone(mp: pytest.MonkeyPatch) -> None:
    """The old rule: an ID whose lifecycle ended is free for any session and kind."""

    def forget_ended(tx: Tx, input_id: str | None) -> None:
        owner = tx.store.owners.get(input_id or "")
        if owner is None or owner.copied:
            return
        log = tx.log(owner.session)
        if log.pending_row(input_id or "") is None and log.message(input_id or "") is None:
            owners = {k: v for k, v in tx.store.owners.items() if k != input_id}
            tx.store = store.Store(tx.store.sessions, owners)

    for name in ("admit", "compact"):
        original = getattr(inbox, name)

        def freeing(tx: Tx, op: Any, original: Any = original) -> Any:
            forget_ended(tx, op.input)
            return original(tx, op)

        mp.setattr(inbox, name, freeing)
