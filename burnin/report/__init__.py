"""Reports beyond JUnit and gate.json: a self-contained HTML page for operators."""
