"""Tests of the ACP test harnesses themselves (schema validator, SDK/raw/TS clients, startup bench)."""
