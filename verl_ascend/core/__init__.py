"""The lowest layer: activation, the post-import hook, the patch registry, the settings table, host and
verl facts, and small output helpers. Imports nothing above it (patches, features, commands)."""
