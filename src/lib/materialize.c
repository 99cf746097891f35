/* materialize.c - placeholder, being written */
