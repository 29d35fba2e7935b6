"""The one error type the CLI turns into a one-line message and a non-zero exit code, and
the stop request that Ctrl-C or SIGTERM leaves for long loops."""

import threading


class UserError(Exception):
    """Bad input from the user (malformed model, unknown op, missing kernel, bad file).

    The CLI prints ``scalecheck: error: <message>`` and exits with ``exit_code``.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


# Set by the CLI's SIGINT/SIGTERM handler. The KeyboardInterrupt the handler raises is
# lost when it lands inside a destructor (Z3's objects free themselves in __del__, and
# Python ignores exceptions there), so loops over long work also check this between items.
stop_requested = threading.Event()


def check_stop():
    if stop_requested.is_set():
        raise KeyboardInterrupt
