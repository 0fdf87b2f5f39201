"""The scenario library: hand-written scenario files (``library/*.toml``), their
schema and loader, the runner that plays them against a target, and the
renderer that writes trace steps back as a scenario file.

- :mod:`.schema`: the file format (pydantic, ``extra="forbid"``);
- :mod:`.load`: files to validated scenarios, errors as one-line HarnessErrors;
- :mod:`.runner`: run against a Target, record a Trace, judge expectations and invariants;
- :mod:`.render`: ``write_scenario(steps, policy, ...)``, for the shrinker and explorer;
- :mod:`.names`: portable names for generated IDs (``gen:N``) and fork copies (``copy:X``);
- :mod:`.command`: the work of ``inboxsim run``.
"""

from .load import LoadedScenario as LoadedScenario
from .load import library_paths as library_paths
from .load import load_scenario as load_scenario
from .load import load_text as load_text
from .render import write_scenario as write_scenario
from .runner import ScenarioResult as ScenarioResult
from .runner import run_scenario as run_scenario
