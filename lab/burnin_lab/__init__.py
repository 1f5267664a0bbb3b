"""Simulated racks behind real daemons (sshd, slurmctld/slurmd, munged), for tests and rehearsals."""
