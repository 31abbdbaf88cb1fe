"""A live cluster's day: ``plbjax-record`` (recorder.py) writes it, and ``plbjax-import`` turns it into the
replay's timeline (timeline.py, SF's events mapped at the door in events.py)."""
