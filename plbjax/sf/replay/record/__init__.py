"""The record a replay leaves: the series, actions, summary, plots and files (`writing`), the story
told in words (`narrative`, from the scheduler's `chronicle`) and the progress line (`progress`)."""

from plbjax.sf.replay.record.progress import ReplayProgress
from plbjax.sf.replay.record.writing import story, summary, write_outputs

__all__ = ["ReplayProgress", "story", "summary", "write_outputs"]
