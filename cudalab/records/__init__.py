"""cudalab.records: the saved run record, its comparison and the CI gate (no GPU)."""
