/* store.c - placeholder, being written */
