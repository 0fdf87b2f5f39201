"""Search for bugs and make them small: the state-space explorer, its merge key,
the shrinker and the replay of a counterexample, lockstep against the model,
the Hypothesis state machine, and the linearizability checker.

- :mod:`.explore` (with :mod:`.canon`, the key under which two states are the same):
  every interleaving up to a bound, breadth first;
- :mod:`.shrink`: the one shrink engine (:mod:`.shrink.engine`) and its drivers: a failing
  run, a scenario file or a seed through an adapter made small, as a scenario file;
- :mod:`.repro`: a conformance failure shrunk through the adapter, as a repro file;
- :mod:`.lockstep`: a target run side by side with the model, step by step (each
  side normalized by :mod:`.side`; the first difference a :mod:`.divergence`; a
  concurrent group's results placed on its members by :mod:`.placement`; the
  scenario library in lockstep, :mod:`.lockstep_scenarios`);
- :mod:`.stateful`: the same as a Hypothesis rule-based state machine;
- :mod:`.linearize` (with :mod:`.history` and :mod:`.compare`): linearizability of
  concurrent groups against the reference model, a pure library that imports
  only :mod:`inboxsim.model`. :func:`linearize` takes a :class:`Group` and returns
  :class:`Legal` with an order that explains everything the target showed, or
  :class:`Illegal` with the orders tried and why each failed; ``linearize.py``
  says how and why the search is sound;
- :mod:`.groups`: the group driver, concurrent groups sent to a target and each
  judged by :func:`linearize`.

The names below are the linearizability checker's; the other modules are imported
by name.
"""

from .compare import Match as Match
from .compare import Mismatch as Mismatch
from .history import Group as Group
from .history import Msg as Msg
from .history import Request as Request
from .history import Returned as Returned
from .history import Row as Row
from .history import Shown as Shown
from .history import Unknown as Unknown
from .history import returned_from_wire as returned_from_wire
from .history import shown_from_wire as shown_from_wire
from .linearize import DeadEnd as DeadEnd
from .linearize import Illegal as Illegal
from .linearize import Legal as Legal
from .linearize import Move as Move
from .linearize import Undecided as Undecided
from .linearize import Verdict as Verdict
from .linearize import footprint as footprint
from .linearize import linearize as linearize
from .linearize import split as split
