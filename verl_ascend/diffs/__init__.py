"""The upstream-ready diffs of the runtime fixes (``patches/`` in the repository, ``upstream_patches`` in the wheel)."""
