"""The storage suite's live measurement (STO-03): storage I/O against the fabric byte counters."""
