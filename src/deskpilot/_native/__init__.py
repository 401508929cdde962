"""Compiled kernels (built by setup.py from native/*.pyx). Import through deskpilot.imaging."""
