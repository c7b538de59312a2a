"""The two rich consoles every command prints on: ``out`` (stdout) and ``err`` (stderr, progress and notes).

Shared by the CLI and the library parts that show progress (`planner.sweep.engine`), so that the library never
imports the CLI.
"""

from __future__ import annotations

from rich.console import Console

# Rich markup is off on both consoles: every string printed (tables, titles, notes, warnings) may carry
# user text — names, file names, values — and ``[/]`` or ``[red]x[/red]`` in it must print as written,
# not raise MarkupError or vanish.  A site that means markup passes ``markup=True`` and escapes the user
# text it embeds (`rich.markup.escape`), as the error line in `planner.cli.main` does.  Emoji codes
# (``:cat:``) are not replaced either: they are user text too.
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
if not out.is_terminal:  # pipes and files: wide enough that tables never truncate names
    out = Console(highlight=False, soft_wrap=True, width=160, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)
