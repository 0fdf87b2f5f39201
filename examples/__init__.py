"""The example adapters, and ``inboxsim init-adapter``, which copies one.

Each example is one file that speaks the adapter protocol around a
deliberately simple durable inbox of its own (not the reference model): its
state is one JSON file under ``INBOXSIM_DATA_DIR``, rewritten before each
response. ``python_inbox.py`` uses Python's standard library only and
``node_inbox.js`` Node's; neither imports inboxsim, so either can be copied
anywhere and grown into a real adapter. Both pass ``inboxsim conformance``
(``tests/test_examples.py``) and carry a planted bug behind
``INBOXSIM_EXAMPLE_BUG=1``. The guide to the protocol is ``docs/protocol.md``,
installed with the package (``inboxsim/docs/protocol.md``) so that
``inboxsim init-adapter`` can put it beside the copy (:func:`skeleton` says
what to write; the command writes it).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import HarnessError


@dataclass(frozen=True)
class Example:
    lang: str
    title: str
    source: str  # the file in this package
    name: str  # what it is called in the user's folder
    runner: str  # the interpreter a user types


EXAMPLES = {
    "python": Example("python", "Python", "python_inbox.py", "adapter.py", "python3"),
    "node": Example("node", "Node", "node_inbox.js", "adapter.js", "node"),
}
BUG_ENV = "INBOXSIM_EXAMPLE_BUG"

README = """\
# A {title} inbox adapter

Written by `inboxsim init-adapter --lang {lang}` (inboxsim {version}): a copy of
inboxsim's {title} example, a deliberately simple durable inbox (one JSON file
under `$INBOXSIM_DATA_DIR`, rewritten before each response) behind the
adapter protocol. As written it passes conformance with the features
synthetic, compaction, resume and interrupt; in this folder:

    inboxsim conformance --adapter "{command}"

Then replace its inbox with yours, one operation at a time, rerunning that
command. `protocol.md` beside this file is the protocol guide (inboxsim's
`docs/protocol.md`): start with its "first hour", and see "Growing the
example" to add fork, revert and failpoints. `{bug}=1` switches on
a planted bug, to see what a failure looks like.
"""


def example(lang: str) -> Example:
    try:
        return EXAMPLES[lang]
    except KeyError:
        raise HarnessError(
            f"--lang {lang!r} is not an example: one of {', '.join(EXAMPLES)}"
        ) from None


def source_path(lang: str) -> Path:
    """The installed example file for ``lang``."""
    return Path(str(resources.files(__name__).joinpath(example(lang).source)))


def protocol_guide() -> str:
    """The text of ``docs/protocol.md``, installed with the package."""
    return resources.files("inboxsim").joinpath("docs", "protocol.md").read_text("utf-8")


@dataclass(frozen=True)
class Skeleton:
    """What ``init-adapter`` writes: each file's text by path (the adapter
    first), the adapter (made executable: it starts with a #! line), and
    the conformance command line for the copy."""

    files: dict[Path, str]
    adapter: Path
    command: str


def skeleton(lang: str, folder: str | Path, version: str) -> Skeleton:
    """The ``lang`` example as a copy in ``folder``, with a README and the
    protocol guide."""
    chosen = example(lang)
    target = Path(folder)
    adapter = target / chosen.name
    files = {
        adapter: source_path(lang).read_text("utf-8"),
        target / "protocol.md": protocol_guide(),
    }
    files[target / "README.md"] = README.format(
        lang=lang,
        title=chosen.title,
        version=version,
        command=f"{chosen.runner} {chosen.name}",
        bug=BUG_ENV,
    )
    return Skeleton(files, adapter, shlex.join([chosen.runner, str(adapter)]))
