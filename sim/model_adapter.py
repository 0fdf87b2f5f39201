"""Deprecated alias, kept one release (until 0.4): ``python -m inboxsim.sim.model_adapter``
is now ``python -m inboxsim.targets.model_adapter`` (docs/architecture.md, "Shims")."""

if __name__ == "__main__":
    from ..targets.model_adapter import main

    raise SystemExit(main())
