"""Run with an installed movebench first on the path (tests/test_installed.py): validate a campaign, render a report."""

import json
import sys

import movebench
from movebench import campaign, families
from movebench.core import records, resources
from movebench.engine import plan
from movebench.judging import report

assert movebench.__file__.startswith(sys.argv[1]), movebench.__file__
assert resources.checkout() is None
try:
    campaign.validate({"campaign": {"name": "inst"}, "shuffle": {"windows": [0]}})
    refused = None
except Exception as error:  # noqa: BLE001
    refused = str(error)
config = campaign.validate({"campaign": {"name": "inst", "results_dir": "results", "repetitions": 3},
                            "shuffle": {"patterns": ["uni"], "message_sizes": [4096], "windows": [2]}})
grid = plan.grid(config)
point = grid["shuffle"][0]
recs = [records.record("shuffle", "uni", point, rep, False, elapsed_s=0.001, nbytes=8192) for rep in range(3)]
records.write_jsonl(f"results/raw/shuffle/{families.point_path(point)}.jsonl", recs)
out = report.render_partial(config, grid)
print(json.dumps({"refused": refused, "report": str(out), "html": open(out).read()}))
