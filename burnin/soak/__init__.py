"""``burnin soak``: hours of load on every node while every health signal is watched (BRN-01..07).

- :mod:`burnin.soak.plan`: site settings, stages and their commands;
- :mod:`burnin.soak.clock`: real time, or a simulated clock that compresses a day into seconds;
- :mod:`burnin.soak.nodes`: the one seam to the nodes (run a command, take a sample);
- :mod:`burnin.soak.signals`, :mod:`burnin.soak.monitor`: samples in, fatal events out (pure);
- :mod:`burnin.soak.results`, :mod:`burnin.soak.drift`: stage outputs in, series and their verdicts out (pure);
- :mod:`burnin.soak.state`: the checkpoint, written atomically every interval, and ``--resume``;
- :mod:`burnin.soak.scheduler`: the loop; :mod:`burnin.soak.verdicts`: gate.json at the end;
- :mod:`burnin.soak.progress`: a live table on a terminal, one line per interval otherwise.
"""
