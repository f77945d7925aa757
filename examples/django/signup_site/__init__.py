"""The signup example's Django project."""
