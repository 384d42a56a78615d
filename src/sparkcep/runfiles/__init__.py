"""What a run leaves on disk, and how to read it back without Spark.

``layout`` names every file and directory of a checkpoint and of an output directory (the only module that
does); ``outputs`` the records a run writes and reads back (output kinds, late and dead-letter records, batch
metrics); ``metrics`` reads a checkpoint's batch metrics as they grow; ``status`` writes and reads the job's
status file; ``summary`` is the run's summary (``OUTPUT/_summary.json``); ``checkpoint`` refuses a checkpoint
that lost one of its halves.
"""
