"""The project's error types: each carries one line that names the problem for the user."""
import sys


class ConvnetError(Exception):
    """Base of every error the CLI turns into one clear line and exit code 2."""


class DataError(ConvnetError):
    """A data file is missing, truncated or corrupt."""


class WeightsError(ConvnetError):
    """A weights file is missing or its names, shapes or dtypes do not match."""


class UsageError(ConvnetError):
    """Bad command-line input: unknown variant, batch out of range, ..."""


class GPUUnavailable(ConvnetError):
    """A GPU variant was asked for where there is no GPU or no PyCUDA."""


class GPUError(ConvnetError):
    """A CUDA call or kernel launch failed; the message names the kernel and the variant."""


def exit_code(prog: str, command, *args) -> int:
    """Runs a command-line entry point: a ConvnetError becomes one line on stderr and exit code 2,
    Ctrl-C exit code 130, never a traceback."""
    try:
        return command(*args)
    except ConvnetError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:         # `convnet --list | head -1`: the reader left; end quietly, as `cat` does
        _detach_stdout()
        return 141


def _detach_stdout() -> None:
    """Points stdout at /dev/null so that the interpreter's last flush does not fail again on the closed pipe."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
