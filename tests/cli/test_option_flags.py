"""The methods' flags, made from their option sets (:mod:`bnn.cli.option_flags`)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest
from bnn.inference import METHODS
from bnn.inference.point_estimate import MapOptions

from bnn.cli.arguments import fit_options
from bnn.cli.main import build_parser
from bnn.cli.option_flags import SET_BY_THE_COMMAND, documented_fields, first_sentence, flag_fields
from bnn.options import option, positive_number


def subcommand_help(name: str) -> str:
    """The help of ``bnn <name>``, its white space collapsed."""
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    return " ".join(commands.choices[name].format_help().split())


def test_an_option_added_to_a_method_is_a_flag_with_no_edit_to_the_command_line(monkeypatch):
    @dataclass(frozen=True)
    class DampedOptions(MapOptions):
        """Options of a method made in this test.

        Attributes
        ----------
        damping : float
            How much each step is damped. A second sentence the flag leaves out.
        """

        damping: float = option(0.5, positive_number)

    damped = dataclasses.replace(METHODS.get("map"), name="map-damped", options=DampedOptions)
    monkeypatch.setitem(METHODS._entries, "map-damped", damped)
    given = build_parser().parse_args(["fit", "--method", "map-damped", "--damping", "0.7", "--out", "run"])
    assert fit_options(given)["damping"] == 0.7 and "damping" not in fit_options(build_parser().parse_args(["compare"]))
    assert "--damping DAMPING How much each step is damped. [default map-damped: 0.5]" in subcommand_help("fit")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "--method", "map-damped", "--damping", "strong", "--out", "run"])


def test_every_option_of_every_method_is_a_flag_with_a_description():
    fields = flag_fields()
    for name in METHODS:
        options = METHODS.get(name).options
        documented = documented_fields(options)
        for field in dataclasses.fields(options):
            assert field.name in documented, f"{name}: option {field.name} has no entry in its Attributes"
            assert (field.name in fields) != (field.name in SET_BY_THE_COMMAND)


def test_flags_take_their_type_default_and_choices_from_the_option_set():
    parser = build_parser()
    args = parser.parse_args(["compare", "--no-jit", "--engine", "pyro", "--structure", "diag", "--map-max-iter", "7",
                              "--precondition-decay", "0.9", "--guide", "autonormal"])
    assert fit_options(args) | {"seed": 0} == {"jit": False, "engine": "pyro", "structure": "diag", "map_max_iter": 7,
                                               "precondition_decay": 0.9, "guide": "autonormal", "seed": 0,
                                               "progress": True}
    for bad in (["--structure", "dense"], ["--guide", "gausian"], ["--map-max-iter", "7.5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["compare", *bad])
    text = subcommand_help("compare")
    assert "--num-warmup NUM_WARMUP Adaptation iterations per chain, discarded (>= 0). [default nuts: 300; sghmc, sgld: " \
           "2000]" in text
    assert "--tune-prior-precision, --no-tune-prior-precision" in text and "[default laplace: unset]" in text
    # a description that only points at its type ("See :class:`ChainStart`.") says the type's first sentence
    assert "--init {map,prior} Where each chain starts. [default csgld, nuts, sghmc, sgld: 'map']" in text


def test_mc_dropouts_weight_init_is_its_own_flag_apart_from_the_chains_init():
    parser = build_parser()
    given = fit_options(parser.parse_args(["compare", "--weight-init", "glorot", "--init", "map"]))
    assert given["weight_init"] == "glorot" and given["init"] == "map"
    with pytest.raises(SystemExit):
        parser.parse_args(["fit", "--method", "mc-dropout", "--weight-init", "map", "--out", "r"])


@pytest.mark.parametrize("text, sentence", [
    (r"Draws kept per chain (>= 4). More.", "Draws kept per chain (>= 4)."),
    (r":math:`\epsilon_0`, the first step size of :class:`~bnn.inference.sgmcmc.StepSchedule` 0.5.", r"\epsilon_0, the "
     "first step size of StepSchedule 0.5."),
    ("Use ``JitTrace_ELBO`` (faster)", "Use JitTrace_ELBO (faster)"),
])
def test_a_flag_says_the_first_sentence_of_the_description_in_plain_text(text, sentence):
    assert first_sentence(text) == sentence
