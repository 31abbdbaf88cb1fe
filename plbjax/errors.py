"""The one exception type for bad user input (reported with exit status 2)."""


class BadInput(ValueError):
    """Input that plbjax refuses: the message names the offending key or value."""
