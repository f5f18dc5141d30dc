"""The transpiler: a gast toolkit, static analyses and the passes that use them."""
