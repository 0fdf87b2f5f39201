"""Re-pin the trace hashes that ``tests/test_pinned_hashes.py`` checks.

    python scripts/pin_hashes.py [OUT.json]

Run it after a deliberate change of what a seed means (a model rule, the
workload, a checker that stops a run elsewhere), commit the new
``tests/pinned_hashes.json`` and say in ``CHANGELOG.md`` which change moved
the hashes and why. Needs the package installed (``pip install -e .``).
"""

from __future__ import annotations

import sys

from inboxsim.tests.test_pinned_hashes import main

if __name__ == "__main__":
    sys.exit(main())
