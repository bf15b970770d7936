"""The dashboard's screens: one module per screen, thin (compose, bindings, redraw)."""
