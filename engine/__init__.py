"""formcast.engine."""
