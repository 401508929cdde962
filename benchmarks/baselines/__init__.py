"""Baselines the imaging benchmarks compare deskpilot with, reimplemented faithfully."""
