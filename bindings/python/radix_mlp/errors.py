"""RadixMLPError: a non-OK status of the library with its thread-local message."""

from . import _abi
from ._loader import LIB


def _text(raw):
    return raw.decode("utf-8", "replace") if raw else ""


def status_string(status):
    """The library's fixed English description of a status code (``rmlp_status_string``)."""
    return _text(LIB.rmlp_status_string(int(status)))


def last_error():
    """The detail of the last error on the calling thread (``rmlp_last_error``); "" after success."""
    return _text(LIB.rmlp_last_error())


class RadixMLPError(RuntimeError):
    """A call into libradix_mlp returned an error status.

    ``status`` is the ``RMLP_ERR_*`` code (negative int), ``status_name`` its name,
    ``message`` what ``rmlp_last_error()`` said right after the failing call on the same thread
    (for example ``"rmlp_plan_build: cu_seqlens[0]=1, must be 0"``).
    """

    def __init__(self, status, message):
        super().__init__(status, message)
        self.status = int(status)
        self.message = message

    @property
    def status_name(self):
        return _abi.STATUS_NAMES.get(self.status, "RMLP_STATUS_%d" % self.status)

    def __str__(self):
        return "%s [%s: %s]" % (self.message or status_string(self.status), self.status_name, status_string(self.status))


def check(status):
    """Raises RadixMLPError for a non-OK status, with the message read immediately."""
    if status != _abi.RMLP_OK:
        raise RadixMLPError(status, last_error())
