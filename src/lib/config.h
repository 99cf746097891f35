/*
 * config.h - configuration sets (config.c).
 *
 * Owns: wstore_config, its JSON file form, the environment and the known
 * keys.  Only the in-memory parser is internal (tests and the fuzzer).
 */
#ifndef WSTORE_CONFIG_H
#define WSTORE_CONFIG_H

#include <stddef.h>

#include "wstore/wstore.h"

/* Parse config JSON from memory; name is used in messages in place of the
 * file path.  Same rules as wstore_config_load. */
int wstore__config_parse(wstore_config **out, const char *json, size_t len,
			 const char *name);

#endif
