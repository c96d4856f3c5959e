"""Helpers that run lazarus inside web frameworks: :mod:`lazarus.integrations.fastapi`."""
