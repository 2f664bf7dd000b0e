"""The names in an item's text: those it defines (symbols.py) and those it mentions (mentions.py)."""
