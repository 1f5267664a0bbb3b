"""pytester runs pytest in this process and, after each run, forgets the modules that run imported.

Two things must therefore be imported once, up front, so that every in-process
run shares one copy:

- PyYAML: its C parser (``yaml._yaml``) outlives a re-import of the Python
  package and then hands out events of the forgotten classes, which the
  hardened loader does not recognise;
- the check registry: a re-imported check module would register its check id
  a second time in the registry that outlived it.
"""

import yaml  # noqa: F401

from burnin.checks import load_all

load_all()
