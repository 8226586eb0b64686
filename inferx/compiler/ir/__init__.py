"""The `ix` dialect: symbolic dims, tensor types, ops, IR text."""
