/* delete.c - placeholder, being written */
