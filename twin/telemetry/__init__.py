"""Production telemetry: COUNTERS_DB read, a production run written, compared, exported."""
