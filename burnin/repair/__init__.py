"""The repair ladder and return to service (issue 23 items 3 and 4, docs/repair.md).

:mod:`burnin.repair.policy` decides the next step for a node burnin took out (pure);
:mod:`burnin.repair.settings` reads the site's ladder; :mod:`burnin.repair.journal` keeps every decision;
:mod:`burnin.repair.bundle` writes the vendor bundle; :mod:`burnin.repair.executor` takes the steps.
"""
