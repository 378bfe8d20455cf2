"""Tree search engines over batches of board-game roots: `search=sequential`."""
