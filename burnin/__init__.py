"""burnin: acceptance, burn-in and health probes for bare-metal NVIDIA H100 GPU nodes."""

__version__ = "0.1.0"
