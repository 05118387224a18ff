"""What is sent: token counting, the layout of a request (fixed prompt, memory, recent
window), cuts of oversized messages, the message rules every request obeys, the memory
marker and the wire format."""
