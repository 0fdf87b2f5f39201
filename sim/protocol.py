"""Deprecated alias, kept one release (until 0.4): ``python -m inboxsim.sim.protocol``
is now ``python -m inboxsim.targets.protocol`` (docs/architecture.md, "Shims")."""

if __name__ == "__main__":
    from ..targets.protocol import main

    raise SystemExit(main())
