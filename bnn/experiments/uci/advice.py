"""What a cell's problems say, in the terms of ``bnn uci``.

A method words its problems for a Python caller (``num_chains``, ``num_warmup=1000``) or for ``bnn fit``
(``steps=, --steps``), and some say a thing twice: its record's problem and the warning it raised about the same fit.
A cell of ``bnn uci`` sets a method's options with ``--set <method>.<option>=<value>``. :func:`cell_problems`
gathers a fit's problems, each once (a warning that restates a problem of the record, near enough word for word, is
dropped), and :func:`for_uci` renders each for ``bnn uci``:

- an option of the method the advice names becomes ``--set <method>.<option>=``, with the value it gives:
  ``raise map_steps``, ``(num_chains)``, ``(or thin)``, ``num_warmup=1000``, ``--num-chains 4``, ``steps=, --steps``;
  what the text reports rather than advises stays as it is (``Newton decrement above map_tolerance=0.1``, ``it would
  not reach map_tolerance``);
- "run two or more chains", said of a cell that ran two or more, says how many it ran;
- a list of members (``members [3]``) says that they are counted from 0, and of how many.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from bnn.inference.fit import METHODS

SAME_SENTENCE = 0.9
"""How alike (:class:`difflib.SequenceMatcher`'s ratio) a warning and a problem of the record must be to say the same
thing (the ensemble's warning adds "ensemble" to its record's sentence)."""
REPORTED_AFTER = ("above", "below", "over", "under", "than", ">", "<", ">=", "<=", "at", "with")
"""Words after which ``option=value`` reports the value the fit ran with, not advice to set it."""
ADVISED_AFTER = ("raise", "lower", "loosen", "tighten", "tune", "increase", "decrease", "reduce", "set", "and", "or")
"""Words after which an option's bare name is advice to set it (``raise map_steps or map_lr``); elsewhere it is
prose (``it would not reach map_tolerance within map_max_iter``)."""
VALUE = r"(?:'[^']*'|\"[^\"]*\"|-?\d[\d.]*(?:e-?\d+)?|True|False|None|\w+)"
MEMBERS = re.compile(r"\bmembers \[(\d+(?:, \d+)*)\]")
TWO_OR_MORE = "run two or more chains"


def cell_problems(method: str, posterior, warned: Iterable[str]) -> list[str]:
    """The problems of a cell's fit, each once, in ``bnn uci``'s terms (module notes): its record's, then the
    warnings ``warned`` that say something else."""
    own = list(dict.fromkeys(posterior.record.problems()))
    others = [text for text in dict.fromkeys(warned) if not any(
        difflib.SequenceMatcher(None, text, problem).ratio() >= SAME_SENTENCE for problem in own)]
    members = getattr(getattr(posterior.record, "options", None), "num_members", None)
    return [for_uci(text, method, chains=posterior.num_chains, members=members) for text in own + others]


def for_uci(text: str, method: str, *, chains: int | None = None, members: int | None = None) -> str:
    """``text``, a problem of a ``method`` fit, in ``bnn uci``'s terms (module notes); ``chains``: the chains the cell
    ran, ``members``: its members."""
    if chains is not None and chains >= 2:
        text = text.replace(TWO_OR_MORE, f"run more chains than the {chains} this cell ran")
    text = MEMBERS.sub(lambda match: _members([int(n) for n in match.group(1).split(", ")], members), text)
    names = sorted(METHODS.get(method).options.names() if method in METHODS else [], key=len, reverse=True)
    if not names:
        return text
    any_name = "|".join(map(re.escape, names))
    flags = "|".join(re.escape(name.replace("_", "-")) for name in names)
    written = "|".join(re.escape(name) for name in names if "_" in name) or r"(?!)"
    pattern = re.compile(
        rf"(?P<pair>\b(?P<pair_name>{any_name})=, --[\w-]+)"  # steps=, --steps
        rf"|(?P<flag>(?<![\w-])--(?P<flag_name>{flags})(?![\w-])(?: (?P<flag_value>-?\d[\d.]*(?:e-?\d+)?))?)"
        rf"|(?P<assign>(?<![\w.-])(?P<assign_name>{any_name})=(?P<value>{VALUE}))"  # num_warmup=1000
        rf"|(?P<bracket>\((?P<either>or )?(?P<bracket_name>{any_name})\))"  # (num_chains), (or thin)
        rf"|(?P<bare>(?<![\w.-])(?P<bare_name>{written})(?![\w=-]))")  # map_steps; a plain word may be prose
    return pattern.sub(lambda match: _option(match, method), text)


def _option(match: re.Match, method: str) -> str:
    """The ``--set`` form of one option the advice names (see :func:`for_uci`)."""
    if match["pair"]:
        return f"--set {method}.{match['pair_name']}="
    if match["flag"]:
        return f"--set {method}.{match['flag_name'].replace('-', '_')}={match['flag_value'] or ''}"
    if match["assign"]:
        before = match.string[:match.start()].rstrip()
        if before.endswith(REPORTED_AFTER):
            return match[0]
        return f"--set {method}.{match['assign_name']}={match['value'].strip(chr(39) + chr(34))}"
    if match["bracket"]:
        return f"({match['either'] or ''}--set {method}.{match['bracket_name']}=)"
    before = match.string[:match.start()].split()
    if not before or before[-1].lower() not in ADVISED_AFTER:
        return match[0]
    return f"--set {method}.{match['bare_name']}="


def _members(numbers: list[int], count: int | None) -> str:
    """``members [0, 3]`` as words: which members, counted from 0, of how many."""
    if count is not None and numbers == list(range(count)):
        return f"all {count} members"
    of = f", of {count}" if count is not None else ""
    named = str(numbers[0]) if len(numbers) == 1 else ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"
    return f"member{'s' if len(numbers) > 1 else ''} {named} (counted from 0{of})"
