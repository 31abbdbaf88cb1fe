"""The one exception type for bad user input (reported with exit status 2)."""


class BadInput(ValueError):
    """Input that plbjax refuses: the message names the offending key or value."""


def did_you_mean(word: str, known) -> str:
    """` (did you mean 'X'?)` for the known name nearest `word`, or '' if none is near."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
