"""The `planner` command line (typer)."""
