"""The local web UI (``spyglass ui``): the run list and live run pages over the store."""
