"""Compiled kernels (built by setup.py from native/*.pyx). Import through deskpilot.imaging.

One loader picks each module or its numpy twin (deskpilot.imaging._backend.load), and one
contract holds for both: the Python wrappers check the arguments, the kernels trust them.
"""
