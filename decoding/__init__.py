"""formcast.decoding."""
