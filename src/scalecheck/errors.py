"""The one error type the CLI turns into a one-line message and a non-zero exit code."""


class UserError(Exception):
    """Bad input from the user (malformed model, unknown op, missing kernel, bad file).

    The CLI prints ``scalecheck: error: <message>`` and exits with ``exit_code``.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
