"""Target of verl's ``verl.plugins`` entry point (verl >= 0.9 loads it inside ``import verl``).

verl swallows exceptions from plugins at DEBUG level, so activation reports its own failures.
"""

from verl_ascend.core.activation import activate

activate(source="entry-point")
