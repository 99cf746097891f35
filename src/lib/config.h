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

/* ---- the known keys (config_keys.c) ---------------------------------- */

/* How a value is checked: WSTORE__CHECK_SET, a value being set into a
 * config file (a file it names must exist: `config set`); WSTORE__CHECK_FILE,
 * a value read from a config file (a file it names must be an absolute
 * path).  Flags and settings (wstore_config_set) are checked by type only:
 * the file they name is opened, and its error reported, by its user. */
#define WSTORE__CHECK_SET 1u
#define WSTORE__CHECK_FILE 2u

/* 0, or WSTORE_EINVAL with the last error "{ctx}key 'K' ..." (ctx is
 * "config 'PATH': ", "environment variable 'V': " or "" for "config key
 * 'K' ..."): an unknown key, or a value of the wrong type or range.  A
 * NULL value (unset) is fine. */
int wstore__config_check(const char *ctx, const char *key, const char *value,
			 unsigned how);
size_t wstore__config_nkeys(void);
/* The index of key among the known keys, or -1. */
int wstore__config_key_index(const char *key);
/* The name of key i (< wstore__config_nkeys()), or NULL. */
const char *wstore__config_key_name(size_t i);
/* Whether key i holds an integer (written as a JSON integer). */
int wstore__config_key_is_int(size_t i);
/* Whether a config file may give key as a JSON integer (integers, sizes in
 * bytes). */
int wstore__config_key_takes_int(const char *key);

#endif
