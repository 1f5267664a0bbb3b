"""Dispatchers: which nodes a run covers and how their facts are gathered (:class:`burnin.dispatch.base.Dispatcher`).

Importing the package imports nothing else: ``burnin run --help`` reads only the registry's options."""
