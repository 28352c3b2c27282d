"""Python side of fa-bench: read, validate, write and summarise result files (schemas fa-bench/1 to /5)."""
