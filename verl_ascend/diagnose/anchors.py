"""The block scan: one regex that finds every line holding a scan anchor, built so that it skips most bytes.

Python's regex engine searches a pattern that begins with one of a set of characters by testing each byte
against that set and trying the pattern only where one matches (a "stop"). What a block scan costs is
therefore set by how often the first characters of its branches occur in a log. A branch that starts a
literal at its first character stops at ``e``, ``s``, ``d``... on most bytes of a log; the same literal
matched from its rarest character, with the characters before it checked by a look-behind, stops only there:
``Worker exit type`` stays ``W(?:orker exit type)``, ``size mismatch for`` becomes ``z(?:(?<=siz)e mismatch for)``.
A line holds a match of the built regex exactly when it holds one of the literals (or an error code), so the
lines the scanner reads do not change (tests/unit/test_diagnose_anchors.py).

Literals made only of common characters (``died``, ``failed``, ``state_dict``) would make their character a
stop on a large share of all bytes; they are searched with ``bytes.find`` instead, one pass each (a C loop
that skips by the literal's length), which costs less than the stops they would add. Measured on the bench's
200 MB (bench/diagnose_speed.py): stops at bytes as common as ``N`` or rarer and 17 finds, 2.8 s CPU; stops at
upper-case letters only and 30 finds, 3.2 s; a few frequent letters as stops and 3 finds, 5.3 s.
"""

import re

# Printable bytes from the most to the least frequent, measured on this project's log fixtures (the seven real
# rehearsal console logs and the public excerpts, tests/fixtures/diagnose/rehearsal/ and public/, 412 kB):
# space 8.4 %, e 6.8 %, t 5.5 % ... N 0.65 % ... E 0.14 %; bytes not listed are rarer still.
FREQUENCY = (b" etoranisl_cm0pd2u.1g:h-6/3,=f4k[y958N()bv7xRWSwFAUTCIP'GqDL]EzVO\"MQ`j^H<>|B*{}K!%#+?Y;XZJ\\~")
# the most frequent byte a branch may start with: ``N`` and anything rarer (under 0.7 % of a log's bytes)
RARE_FROM = FREQUENCY.index(b"N")
_RANK = {b: i for i, b in enumerate(FREQUENCY)}


def _rarity(byte: int) -> int:
    return _RANK.get(byte, len(FREQUENCY))


def _anchor_at(literal: bytes, stops: set):
    """Index of the byte to start matching ``literal`` at: one already a stop if it has any (no new stops),
    else its rarest byte if that is rare enough; None when only common bytes are left (searched with find)."""
    shared = [i for i, b in enumerate(literal) if b in stops]
    if shared:
        return max(shared, key=lambda i: _rarity(literal[i]))
    rare = [i for i in range(len(literal)) if _rarity(literal[i]) >= RARE_FROM]
    return max(rare, key=lambda i: _rarity(literal[i])) if rare else None


def build(literals, codes: dict):
    """(compiled regex, literals left to bytes.find) for the literal anchors and the code patterns.

    ``codes`` maps a first character to the regex of the rest (``{"E": r"[A-Z]\\d{4}|RR\\d{5}"}``): patterns that
    are not literals start at a fixed character, which is a stop whatever the literals choose."""
    literals = sorted({lit.encode() for lit in literals})
    # a literal that contains another is found through it: the same lines
    literals = [lit for lit in literals if not any(o != lit and o in lit for o in literals)]
    stops = {ord(c) for c in codes}
    # choosing a stop for one literal can give others a shared one: repeat until nothing moves
    while True:
        anchors = {lit: _anchor_at(lit, stops) for lit in literals}
        chosen = {ord(c) for c in codes} | {lit[i] for lit, i in anchors.items() if i is not None}
        if chosen == stops:
            break
        stops = chosen
    branches = {c.encode(): [p.encode()] for c, p in codes.items()}
    for lit, i in anchors.items():
        if i is not None:
            behind = b"(?<=" + re.escape(lit[:i + 1]) + b")" if i else b""
            branches.setdefault(lit[i:i + 1], []).append(behind + re.escape(lit[i + 1:]))
    # one branch per stop byte (the engine skips a branch whose first byte differs with one comparison)
    pattern = b"|".join(re.escape(c) + b"(?:" + b"|".join(sorted(set(rest))) + b")" for c, rest in sorted(branches.items()))
    return re.compile(pattern), tuple(lit for lit, i in anchors.items() if i is None)
