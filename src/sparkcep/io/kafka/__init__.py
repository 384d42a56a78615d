"""Kafka on confluent-kafka: the client helpers, the source (a Spark Python data source) and the sink."""
