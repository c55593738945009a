r"""The MAP search: Adam, then a Gauss-Newton / Levenberg-Marquardt or L-BFGS polish, judged converged by the Newton
decrement; the noise scale and prior precision chosen with it by the evidence; MAP fits from independent starts in
worker processes. The MAP method, Laplace, the ensemble, SWAG and the chains' MAP starts build on it."""
