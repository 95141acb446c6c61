"""Trace files: chrome traces written by ``torch.profiler`` anywhere, read into plain records."""
