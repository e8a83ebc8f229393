"""Data preparation for verl recipes on Ascend (``verl-ascend gsm8k``, ``scripts/gsm8k.py``)."""
