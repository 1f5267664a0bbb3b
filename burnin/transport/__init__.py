"""How commands run on nodes. The only package that starts processes or opens connections."""

from burnin.transport.base import CommandResult, Transport

__all__ = ["CommandResult", "Transport"]
