"""Stream glue: message formats, slot clock, broker and worker plumbing, Prometheus metrics."""
