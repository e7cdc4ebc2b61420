"""formcast: exact structured generation."""
