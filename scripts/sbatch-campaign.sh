#!/usr/bin/env bash
# The whole campaign in one Slurm allocation: `make sbatch NODES=4 TIME=1:00:00`, or
#   sbatch -N 4 -t 1:00:00 scripts/sbatch-campaign.sh [snakemake arguments, e.g. --configfile my.yaml]
# from the repository root (on a file system the nodes share: the batch script runs on the
# allocation's first node). Snakemake runs there with profiles/allocation: every point is an srun step
# of this job, one at a time (docs/slurm.md, "Three ways to run on Slurm"). Killed (scancel, time
# limit), the campaign is resumed by the same command in a new allocation: only what is missing runs.
#SBATCH --job-name=movebench
#SBATCH --exclusive
#SBATCH --output=movebench-%j.out
# SIGTERM to snakemake 120 s before the time limit: the running point stops with its failure record and the
# lock goes, where at the limit itself Slurm allows only KillWait seconds (often 30) before SIGKILL.
#SBATCH --signal=B:TERM@120
set -euo pipefail
# sbatch runs a copy of this script from the spool folder: the repository is where it was submitted.
cd "${SLURM_SUBMIT_DIR:?run this script with sbatch (make sbatch), not directly}"
python="${MOVEBENCH_PYTHON:-.venv/bin/python}"
echo "movebench: allocation ${SLURM_JOB_ID} on ${SLURM_JOB_NUM_NODES:-?} nodes (${SLURM_JOB_NODELIST:-?}), snakemake on $(hostname)"
# exec: Slurm's SIGTERM at scancel or the time limit then reaches snakemake itself, which stops the
# running point (its failure record), writes the partial report and removes its lock for the rerun.
exec "$python" -m snakemake --profile allocation "$@"
