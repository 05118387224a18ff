"""The prompt-cache-stable request: append to the previous request, extend its memory, or
render afresh, so consecutive calls share a cached prefix."""
