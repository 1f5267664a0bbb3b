"""pytester runs pytest in this process and, after each run, forgets the modules that run imported.

PyYAML's C parser (``yaml._yaml``) outlives such a re-import of the Python
package and then hands out events of the forgotten classes, which the
hardened loader does not recognise. Importing PyYAML once, up front, keeps
one copy for every in-process run.
"""

import yaml  # noqa: F401
