"""Typed errors. Library code raises these; the CLI turns them into messages and exit codes."""


class MlftError(Exception):
    """Base class: a user-facing problem with a clear message (no traceback shown)."""

    exit_code = 2


class ConfigError(MlftError):
    """A recipe, suite, mix or option is invalid (names the file and key)."""


class DataError(MlftError):
    """An input file is missing, unreadable or malformed (names the file, column or row)."""


class MissingDataError(DataError):
    """Data a command needs is neither local nor downloadable (names every way to provide it)."""


class ModelError(MlftError):
    """A model reference cannot be resolved or loaded."""


class BackendError(MlftError):
    """A generation backend failed in a way the user must fix (auth, unreachable server...)."""
