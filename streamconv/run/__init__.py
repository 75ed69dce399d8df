"""One stream: a source, a chain and a sink run through the slot ring."""
