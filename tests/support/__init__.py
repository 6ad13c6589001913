"""Test support: the local control plane handle (cluster.py) and deadline-bounded polling (wait.py)."""
