"""Diagnostics of draws: R-hat, ESS and divergences of Markov chains (on the weights and on the predictions), and
ArviZ's summary of any method's draws."""
