"""What the rehearsal changes in a recipe to run it on CPU: nothing here starts a process.

- :mod:`.overrides` — the recipe's overrides rewritten (sizes, paths, engine keys), each change listed;
- :mod:`.engine` — the engine verl composes from the recipe (Megatron, FSDP), its bridge, its config;
- :mod:`.layout` — the Megatron layout (TP/PP/EP/VPP) scaled to the CPU ranks;
- :mod:`.assets` — the tiny model and tokenizer built from the recipe's model's config;
- :mod:`.data` — the data files (gsm8k by our preprocessing, or the recipe's own);
- :mod:`.reward` — the reward function the rehearsal's tiny model is scored by.
"""
