/* import.c - placeholder, being written */
