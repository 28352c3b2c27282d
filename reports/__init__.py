"""Python side of fa-bench: read, validate, write and summarise result files (schema fa-bench/1)."""
