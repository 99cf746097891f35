/* backend_mem.c - placeholder, being written */
