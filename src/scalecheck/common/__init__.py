"""What every stage shares: the one-line error and the stop request, crash-safe files and a
full disk, the command line's argument types, stdout tables and progress bars, per-pair
processes, the run directory's lock, and where the native sources are."""
