"""`python -m plbjax.cli`: the `plbjax` command."""

from plbjax.cli import main

main()
