/* backend_fault.c - placeholder, being written */
