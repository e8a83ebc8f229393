"""What a rehearsal's run proved, read from its own logs: :mod:`.checks` (the checkpoint loaded, no training from
scratch, the resumed step, gradients and KL alive, rollout probabilities aligned) and :mod:`.nodes` (what reached
each node of a multi-node run).
"""
