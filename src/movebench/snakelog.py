"""Send a Snakemake script's output and errors to its rule's log."""

import contextlib
import sys
import traceback


@contextlib.contextmanager
def logged(path):
    with open(path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            yield
        except BaseException:
            traceback.print_exc(file=log)
            log.flush()
            sys.__stderr__.write(f"see {path}\n")
            raise
