"""One render of one call, as a pipeline: sync the history with the store, plan the
request, fit the window, recall the memory, assemble and report."""
