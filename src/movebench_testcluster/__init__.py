"""The test cluster's own package, beside `movebench` and not inside it: a real Slurm on this machine,
for the tests and `make slurm-up`.

Nothing in a campaign imports this package: it exists to test the slurm profile against live
daemons. See docs/notes/slurm-test-cluster.md.
"""
