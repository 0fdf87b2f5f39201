"""The scenario library: hand-written scenario files (``*.toml``) and their loader."""
