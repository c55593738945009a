r"""The curvature of the log joint at a point and what is computed from it: the output Hessians of the likelihoods,
the generalised Gauss-Newton matrix (full, Kronecker-factored per layer), the Newton decrement by conjugate gradients,
and the Laplace evidence with its one-dimensional search. The MAP search's convergence check and polish, and the
Laplace approximation, build on it."""
