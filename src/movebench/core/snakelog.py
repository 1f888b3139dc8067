"""Send a Snakemake script's output and errors to its rule's log."""

import contextlib
import errno
import sys
import time
import traceback
from pathlib import Path

from movebench.core.records import free_space

FULL = (errno.ENOSPC, errno.EDQUOT)


def _full(exc: BaseException) -> OSError | None:
    """The disk-full error behind `exc` (pandas and pyarrow re-raise it from their own handlers), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


@contextlib.contextmanager
def logged(path, writes=None):
    """Output and a traceback to the log at `path`, between a `started` and an `ended` line (epoch seconds: when
    the job ran, for a reader of the log and for the test that no such job ran while a point measured); a full
    disk ends the script with one line on the console naming the folder (`writes`, where the script's outputs
    go) and its free space: the traceback would not reach a log on that disk anyway, and every write while
    printing it failed again, chaining four tracebacks."""
    log = open(path, "w")  # noqa: SIM115 - closed below, where a full disk may refuse the last flush
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            print(f"started {time.time():.3f}", flush=True)
            yield
            print(f"ended {time.time():.3f}", flush=True)
    except BaseException as exc:
        full = _full(exc)
        if full is None:
            with contextlib.suppress(OSError):
                traceback.print_exc(file=log)
                log.flush()
            sys.__stderr__.write(f"see {path}\n")
            raise
        where = Path(writes) if writes else Path(full.filename).parent if full.filename else Path(path).parent
        line = (f"movebench: no space left in {where} ({full.strerror}; its filesystem has {free_space(where)} free): "
                "free space there and run the same command again")
        with contextlib.suppress(OSError):
            print(line, file=log, flush=True)
        print(line, file=sys.__stderr__, flush=True)
        raise SystemExit(1) from None
    finally:
        with contextlib.suppress(OSError):
            log.close()
