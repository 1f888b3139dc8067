"""Shared pieces of every family: sizes, timing, statistics, records, environment; the package's files (`resources`)
and the scripts' log (`snakelog`)."""
