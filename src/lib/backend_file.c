/* backend_file.c - placeholder, being written */
