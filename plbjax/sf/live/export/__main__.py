"""``python -m plbjax.sf.live.export``: plbjax-export."""

from plbjax.sf.live.export.script import main

main()
