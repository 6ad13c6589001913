"""Hugging Face configs of the models the iteration-time model is calibrated on (package data)."""
