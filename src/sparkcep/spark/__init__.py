"""The thin Spark adapter: builds the streaming query, moves state in and out of Spark's state store,
calls the pure core, reconciles timers and writes outputs. Importing this package does not import
pyspark; the modules that need it import it themselves.
"""
