"""The conformance suite: vector runner, candidate adapters, differential machines and the CLI."""
