"""The timeline (timeline.md §1): its document read and validated once (`reading`), its events as
the Failover Manager applies them to the state (`events`, by kind: `nodes`, `loads`, `cluster`),
and the events due on the loop's clock (`pending`)."""

from plbjax.sf.replay.timeline.reading import ActionSeconds, Timeline, load_timeline, parse_timeline, settings_of

__all__ = ["ActionSeconds", "Timeline", "load_timeline", "parse_timeline", "settings_of"]
