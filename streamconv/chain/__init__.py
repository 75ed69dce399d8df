"""What is computed: the filter registry, the spec grammar and the presets."""
