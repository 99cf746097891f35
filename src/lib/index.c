/* index.c - placeholder, being written */
