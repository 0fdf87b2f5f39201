"""The reference model of the OpenCode V2 durable Session inbox.

A pure-functional model: ``apply(state, op, crash_at=None) -> Outcome`` with
no I/O, no clock and no randomness. Durable state (event logs, pending inbox,
transcript, staged revert, fork cutoff) lives in ``State.store``; volatile
state (active executions, open calls, doorbells, step counters) in
``State.runs``, so a crash is exactly ``State.crashed()``. Design choices are
explicit fields of a :class:`Policy`; ``g4`` is the default.
"""

from .apply import DEFAULT_STEP_LIMIT as DEFAULT_STEP_LIMIT
from .apply import PROTOCOL as PROTOCOL
from .apply import Outcome as Outcome
from .apply import apply as apply
from .apply import features as features
from .apply import initial_state as initial_state
from .ops import FAILPOINTS as FAILPOINTS
from .ops import OPS as OPS
from .ops import (
    Answer as Answer, Calls as Calls, Compact as Compact, CrashOp as CrashOp, Create as Create,
    Fork as Fork, Hello as Hello, Interrupt as Interrupt, Log as Log, Messages as Messages,
    Op as Op, Pending as Pending, Prompt as Prompt, Resume as Resume, RevertClear as RevertClear,
    RevertCommit as RevertCommit, RevertStage as RevertStage, Synthetic as Synthetic,
)
from .ops import op_from_wire as op_from_wire
from .policy import G4 as G4
from .policy import PRESETS as PRESETS
from .policy import Policy as Policy
from .policy import PolicyError as PolicyError
from .policy import load_policy as load_policy
from .state import State as State
from .store import SessionLog as SessionLog
from .store import Store as Store
from .store import replay as replay
from .values import Call as Call
from .values import Crashed as Crashed
from .values import Err as Err
from .values import Event as Event
from .values import Message as Message
from .values import Ok as Ok
from .values import Receipt as Receipt
from .values import Reply as Reply
