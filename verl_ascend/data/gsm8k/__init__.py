"""GSM8K → ``train.parquet`` / ``test.parquet`` in the layout verl's gsm8k recipes read.

The rows have the columns verl's ``examples/data_preprocess/gsm8k.py`` writes (that script is not
in verl's wheel, so a pip-installed verl cannot run it):

    data_source   "openai/gsm8k"   (verl's reward dispatch key, whatever mirror the rows came from)
    prompt        [{"role": "user", "content": question + " " + INSTRUCTION}]
    ability       "math"
    reward_model  {"style": "rule", "ground_truth": final answer without thousands commas}
    extra_info    {"split", "index" (row in the source split), "answer", "question"}

The table is built by ``datasets`` from Python rows, the same inference verl's ``Dataset.map``
goes through, so struct field order and the embedded features metadata match what verl's script
writes with the installed ``datasets`` (they differ between datasets 3 and 4+; matching keeps
``concatenate_datasets`` with other verl-made parquet files working).

Sources: the hub through ``datasets`` (``HF_ENDPOINT`` selects a mirror), a local directory
(a hub snapshot with ``main/``, ``train*``/``test*`` parquet or JSON Lines files, or a
``save_to_disk`` folder), or the 30-row sample shipped with verl-ascend (``--sample``).

Answers: the final answer follows ``#### ``. A row whose answer has no such number, two different
ones, or a "number" that is not one (``1.2.3``, ``.``) is never written with a guessed ground
truth: by default the run stops with exit 2 and lists the rows; ``--skip_unparseable`` writes
the other rows and reports what it skipped. Files appear only when both splits are complete
(written to temporary names, then renamed: ``core/outfiles``).

- ``rows``: a gsm8k answer and question -> one verl row, or why not;
- ``sources``: the hub, a local folder or the shipped sample -> one pyarrow table per split;
- ``write``: the run: read, convert every row, write both files or none, report.

The command face is ``verl_ascend/commands/gsm8k.py`` (also ``scripts/gsm8k.py``).
"""

from .rows import DATA_SOURCE, INSTRUCTION, SPLITS, parse_answer, verl_row  # noqa: F401
from .sources import DEFAULT_SAVE_DIR, SAMPLE_DIR, InputError  # noqa: F401
from .write import Options, Written, prepare  # noqa: F401
