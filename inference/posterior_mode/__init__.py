r"""The posterior's mode and the curvature there: the MAP search, its Gauss-Newton / Levenberg-Marquardt polish,
the output curvature of the likelihood, and the Laplace evidence with its search over hyper-parameters. The MAP
method, Laplace, the ensemble and the chains' MAP starts build on it."""
