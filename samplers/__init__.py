"""formcast.samplers."""
