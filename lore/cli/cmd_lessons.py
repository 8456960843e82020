"""Registered in a later commit."""
