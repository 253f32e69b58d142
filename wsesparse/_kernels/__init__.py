"""Compiled kernels (built from the repository's _kernels/ folder)."""
