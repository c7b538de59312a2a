"""``python -m planner`` runs the `planner` command."""

from planner.cli.main import main

main()
