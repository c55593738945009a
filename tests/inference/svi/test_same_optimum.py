r"""AutoNormal and the Bayes-by-Backprop guide optimise the same family, so they reach the same optimum.

On the conjugate model (:mod:`tests.support.conjugate`) the mean-field optimum is known in closed form: means :math:`m`,
variances :math:`1/\Lambda_{kk}`. Each guide is fitted with the same schedule, then the SGD chain from its end
(:func:`tests.support.conjugate.stationary_sgd_chain`, an exact stationary mean) measures where its optimiser settles and how
much it jitters there.
"""

from __future__ import annotations

import pytest
from bnn.inference import fit

from tests.support.conjugate import autonormal_chain, check_meanfield_optimum, meanfield_chain

SCHEDULE = dict(lr=0.01, lr_schedule="cosine", final_lr_fraction=0.01, num_particles=8, jit=True, seed=1,
                progress=False, num_samples=10)


@pytest.mark.long
@pytest.mark.parametrize("steps, chain_steps", [pytest.param(1000, 600, id="short"),
                                                pytest.param(2000, 2000, id="long", marks=pytest.mark.slow)])
def test_autonormal_and_bayes_by_backprop_reach_the_same_mean_field_optimum(conjugate, steps, chain_steps):
    data = (conjugate.x, conjugate.y)
    autonormal = fit(conjugate.model, data, guide="autonormal", guide_options={"init_scale": 0.05}, steps=steps,
                     **SCHEDULE)
    bayes_by_backprop = fit(conjugate.model, data, guide="meanfield", steps=steps,
                            guide_options={"init_rho": -3.0, "local_reparameterisation": False}, **SCHEDULE)
    auto_fitted, auto_chain = autonormal_chain(conjugate, autonormal, num_particles=8, steps=chain_steps)
    bbb_fitted, bbb_chain = meanfield_chain(conjugate, bayes_by_backprop, steps=chain_steps)
    # each at the closed-form optimum (within 4 batch-means standard errors of its chain's average) ...
    auto_mean, auto_se = check_meanfield_optimum(conjugate, auto_chain, auto_fitted)
    bbb_mean, bbb_se = check_meanfield_optimum(conjugate, bbb_chain, bbb_fitted)
    # ... the two stationary averages within 4 standard errors of their difference ...
    assert ((auto_mean - bbb_mean).abs() < 4 * (auto_se**2 + bbb_se**2).sqrt()).all()
    # ... and the two fits' end points within 4 of their difference's stationary standard deviations
    spread = (auto_chain.std(0) ** 2 + bbb_chain.std(0) ** 2).sqrt()
    assert ((auto_fitted - bbb_fitted).abs() < 4 * spread).all(), (auto_fitted - bbb_fitted) / spread
