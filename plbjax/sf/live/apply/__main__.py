"""``python -m plbjax.sf.live.apply``: plbjax-apply."""

from plbjax.sf.live.apply.command import main

main()
