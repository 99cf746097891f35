/*
 * util.h - small helpers every core module may use (util.c).
 *
 * Owns: nothing but the helpers themselves; no module state.
 */
#ifndef WSTORE_UTIL_H
#define WSTORE_UTIL_H

/* Replace a string field (copy); value may be NULL. */
int wstore__set_str(char **field, const char *value);

#endif
