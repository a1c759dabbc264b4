"""What a twin's runs are written as, one module per form: reports (JSON,
JUnit, Markdown), plots, the topology graph, Prometheus metrics and their server."""
