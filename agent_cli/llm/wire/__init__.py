"""What goes over the wire: request shaping, bodies, streams, forcing forms, failures."""
