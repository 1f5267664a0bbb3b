"""The fleet-wide circuit breaker: at most so many nodes taken out by burnin per window (docs/breaker.md).

- :mod:`burnin.breaker.budget`: the budget, pure (Slurm's drains and their times, the window, N/P%);
- :mod:`burnin.breaker.state`: its files in burnin's state directory (settings, allowance, claim file, held log);
- :mod:`burnin.breaker.guard`: what every drain asks first (the Slurm gate, the watch).
"""
