"""JetStream: engine (enable, limits, accounts), API, streams, consumers and stores."""
