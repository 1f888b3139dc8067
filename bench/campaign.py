"""`make run`'s wall time and the share of it spent inside the kernels' timed regions.

Run: .venv/bin/python bench/campaign.py
Runs the default campaign from scratch into a temporary results folder (the installs are
already done), then reads every record: the timed region of a repetition is `timed_s` where a
kernel has more than one (shuffle: partition + exchange), else `elapsed_s`. Warm-ups are timed
regions too and are counted; the share without them is printed beside it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        config["campaign"]["results_dir"] = str(Path(tmp) / "results")
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        run = subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(path), "run",
                              "--profile", "local"], cwd=ROOT)
        subprocess.run([sys.executable, "-m", "movebench", "--configfile", str(path), "efficiency"], cwd=ROOT,
                       check=True)
        return run.returncode


if __name__ == "__main__":
    sys.exit(main())
