"""Dispatchers: which nodes a run covers and how their facts are gathered."""

from burnin.dispatch.base import Dispatcher

__all__ = ["Dispatcher"]
