"""Kafka source (Python Data Source API) and sink on confluent-kafka."""
