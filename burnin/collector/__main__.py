"""``python -m burnin.collector [--root DIR] [--timeout S] [--sources a,b]`` prints facts JSON."""

from burnin.collector.core import run

if __name__ == "__main__":
    run()
