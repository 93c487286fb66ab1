"""`op-plugin demo`: the demo model (`model`: a small block of the shipped ops) run eagerly, through
Meta functions and compiled (`command`)."""
