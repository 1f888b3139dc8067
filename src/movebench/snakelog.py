"""Send a Snakemake script's output and errors to its rule's log."""

import contextlib
import sys
import time
import traceback


@contextlib.contextmanager
def logged(path):
    """Output and errors to `path`, between a `started` and an `ended` line (epoch seconds): when the job ran,
    for a reader of the log and for the test that no such job ran while a point measured."""
    with open(path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        print(f"started {time.time():.3f}", flush=True)
        try:
            yield
            print(f"ended {time.time():.3f}", flush=True)
        except BaseException:
            traceback.print_exc(file=log)
            log.flush()
            sys.__stderr__.write(f"see {path}\n")
            raise
