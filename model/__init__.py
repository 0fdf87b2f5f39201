"""The reference model of the OpenCode V2 durable Session inbox.

A pure-functional model: ``apply(state, op, crash_at=None) -> Outcome`` with
no I/O, no clock and no randomness. Durable state (event logs, pending inbox,
transcript, staged revert, fork cutoff) lives in ``State.store``; volatile
state (active executions, open calls, doorbells, step counters, the runner's
pending work) in ``State.runs`` and ``State.work``, so a crash is exactly
``State.crashed()``. Design choices are explicit fields of a :class:`Policy`;
``g4`` is the default. The fine-grained form (``request``, ``enabled``,
``advance``) runs the runner one transition at a time, for concurrent
histories; ``apply`` is it with the runner run to quiescence at once.
"""

from .apply import DEFAULT_STEP_LIMIT as DEFAULT_STEP_LIMIT
from .apply import PROTOCOL as PROTOCOL
from .apply import Advanced as Advanced
from .apply import Outcome as Outcome
from .apply import RunnerStep as RunnerStep
from .apply import advance as advance
from .apply import apply as apply
from .apply import enabled as enabled
from .apply import features as features
from .apply import initial_state as initial_state
from .apply import request as request
from .ops import FAILPOINTS as FAILPOINTS
from .ops import OPS as OPS
from .ops import (
    Answer as Answer,
)
from .ops import (
    Calls as Calls,
)
from .ops import (
    Compact as Compact,
)
from .ops import (
    CrashOp as CrashOp,
)
from .ops import (
    Create as Create,
)
from .ops import (
    Fork as Fork,
)
from .ops import (
    Hello as Hello,
)
from .ops import (
    Interrupt as Interrupt,
)
from .ops import (
    Log as Log,
)
from .ops import (
    Messages as Messages,
)
from .ops import (
    Op as Op,
)
from .ops import (
    Pending as Pending,
)
from .ops import (
    Prompt as Prompt,
)
from .ops import (
    Resume as Resume,
)
from .ops import (
    RevertClear as RevertClear,
)
from .ops import (
    RevertCommit as RevertCommit,
)
from .ops import (
    RevertStage as RevertStage,
)
from .ops import (
    Synthetic as Synthetic,
)
from .ops import op_from_wire as op_from_wire
from .policy import G4 as G4
from .policy import PRESETS as PRESETS
from .policy import Policy as Policy
from .policy import PolicyError as PolicyError
from .runner import WAKE as WAKE
from .state import State as State
from .state import Work as Work
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
