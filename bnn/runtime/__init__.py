"""Process and file plumbing every layer shares: atomic writes, progress bars, stop signals, worker processes and
their thread limits, seeding, memory checks and warning filters. Imports nothing else of ``bnn``."""
