"""wevent: w-event differentially private statistics over endless streams."""

__version__ = "0.1.0"
