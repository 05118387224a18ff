"""What every stage speaks: messages, the stored records (units, notes, pieces) and the
protocols of the parts a user swaps (tokenizer, embedder, record writer, store)."""
