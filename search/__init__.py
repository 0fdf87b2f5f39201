"""Linearizability of concurrent groups against the reference model (issue 19).

A pure library: it imports only :mod:`inboxsim.model` and the standard
library. :func:`linearize` takes a :class:`Group` (the model's state before
it, the requests with their invoke and completion times and outcomes, what
the target showed after it) and returns :class:`Legal` with an order of the
requests' and the runner's transitions that explains everything the target
showed, or :class:`Illegal` with the orders tried and why each failed.
``linearize.py`` says how and why the search is sound.
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
