"""The one base class for mistakes a person made.

A `UserError` carries a sentence that says what was wrong and what to do; the command layer answers it as
"invalid params" with that sentence and logs it at INFO without a traceback. Every other exception is a
bug or an outage: answered as a server error and logged with its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user (or the client acting for them) made: bad arguments, an unknown language, a
    busy turn, a path outside the workspace. `str(error)` is the sentence shown to the person."""
