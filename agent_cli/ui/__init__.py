"""The terminal: where and when to draw and ask (console), what to draw (render), progress."""
