"""The shared option parsers and typed option sets of :mod:`bnn.options`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from bnn.options import Options, choice, flag, integer, mapping, number, option, optional, path, seed


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Example(Options):
    steps: int = option(10, integer(minimum=1, maximum=100))
    rate: float = option(0.5, number(low=0, high=1, high_open=False))
    colour: Colour = option("red", choice(Colour))
    limit: int | None = option(None, optional(integer(minimum=0)))
    verbose: bool = option(False, flag)

    def check(self) -> None:
        if self.colour is Colour.BLUE and self.limit is None:
            raise ValueError("blue needs a limit")


def test_an_option_set_parses_every_field_when_built():
    built = Example.parse("example", {"steps": np.int64(7), "colour": "blue", "limit": 3})
    assert (built.steps, type(built.steps), built.colour, built.limit) == (7, int, Colour.BLUE, 3)
    assert Example.names() == ["steps", "rate", "colour", "limit", "verbose"]


@pytest.mark.parametrize("given, message", [
    ({"stpes": 3}, r"method 'example' takes no option\(s\) \['stpes'\]; it takes "
                   r"\['colour', 'limit', 'rate', 'steps', 'verbose'\]"),
    ({"steps": 0}, r"steps must be an integer >= 1 and <= 100, got 0"),
    ({"steps": True}, r"steps must be an integer >= 1 and <= 100, got True"),
    ({"steps": 2.0}, r"steps must be an integer >= 1 and <= 100, got 2.0"),
    ({"rate": float("nan")}, r"rate must be a finite number in \(0, 1\], got nan"),
    ({"rate": 0}, r"rate must be a finite number in \(0, 1\], got 0"),
    ({"colour": "green"}, r"unknown colour 'green'; choose from \['red', 'blue'\]"),
    ({"limit": -1}, r"limit must be an integer >= 0, got -1"),
    ({"verbose": "no"}, r"verbose must be True or False, got 'no'"),
    ({"colour": "blue"}, r"blue needs a limit"),
])
def test_bad_options_name_the_problem(given, message):
    with pytest.raises(ValueError, match=message):
        Example.parse("example", given)


def test_the_other_parsers():
    assert seed("seed", np.uint8(3)) == 3 and mapping("guide_options", None) == {} and path("out", "a/b") == Path("a/b")
    for parse, value, message in [(seed, -1, "seed must be a non-negative integer"),
                                  (mapping, [1], "guide_options must be a mapping of option names to values"),
                                  (mapping, {1: 2}, "guide_options must be a mapping"), (path, "", "out must be a folder path")]:
        name = {seed: "seed", mapping: "guide_options", path: "out"}[parse]
        with pytest.raises(ValueError, match=message):
            parse(name, value)


@pytest.mark.parametrize("method", ["svi", "laplace", "mc-dropout"])
def test_the_old_name_num_draws_says_it_is_now_num_samples(method):
    from bnn.inference.fit import METHODS

    with pytest.raises(ValueError, match=r"'num_draws' is now 'num_samples' \(Pyro's name\)"):
        METHODS.get(method).options.parse(method, {"num_draws": 10})
    assert METHODS.get(method).options.parse(method, {"num_samples": 10}).num_samples == 10
