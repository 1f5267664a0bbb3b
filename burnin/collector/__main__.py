"""``python -m burnin.collector [--root DIR] [--timeout S] [--sources a,b]`` prints facts JSON."""

from burnin.collector.core import main

if __name__ == "__main__":
    raise SystemExit(main())
