"""Writing, once per unit: a history cut into units, each unit's record, fields, pieces and
vectors stored as a note."""
