"""What tests and benchmarks share: the launched app, the page, the chat socket, the metrics, fakes."""
