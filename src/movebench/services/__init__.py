"""Services the benchmarks need while they run (started and stopped by make run and the tests)."""
