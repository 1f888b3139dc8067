"""Shared pieces of every family: sizes, timing, statistics, records, environment."""
