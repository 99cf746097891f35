/* config.c - placeholder, being written */
