"""run_mpi under an adaptive rule where the ranks' own values would stop them at different repetitions.

Rank 0 sees values that never meet the CI target (it would run to max), every other rank values that meet it
at min: without agreement the ranks would leave the loop apart and the next collective would hang. Prints,
per rank, how many repetitions it ran and the stop fields of its records, as JSON from rank 0.
"""

import json
import sys
import tempfile
from pathlib import Path

from mpi4py import MPI

from movebench.core.runner import run_mpi
from movebench.core.task import Task

comm = MPI.COMM_WORLD
wide = [1.0, 2.0, 0.5, 3.0, 0.7, 2.5, 0.6, 1.8, 0.9, 2.2, 0.4, 2.9]


def measure(rep, warmup):
    comm.Barrier()  # a collective in every repetition, as every kernel has
    value = wide[rep % len(wide)] if comm.rank == 0 else 1.0 + 1e-6 * rep
    return value, 100, {}


with tempfile.TemporaryDirectory() as tmp:
    task = Task(family="shuffle", variant="uni", point={"pattern": "uni"}, settings={}, ranks=comm.size, nodes=1,
                warmups=1,
                repetitions={"min": 6, "max": int(sys.argv[1]), "ci_target": 0.05},
                out=str(Path(tmp) / "r.jsonl"), meta="")
    recs = run_mpi(comm, task, measure)
fields = [(r["rep"], r["warmup"], r["stop_reason"], r["repetitions_run"]) for r in recs]
everyone = comm.gather(fields, root=0)
if comm.rank == 0:
    print(json.dumps(everyone))
