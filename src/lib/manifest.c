/* manifest.c - placeholder, being written */
