"""Your own frames in your own loop: Filter and StreamFilter."""
