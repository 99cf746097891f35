/*
 * digest.h - SHA-256 (digest.c, over libcrypto).
 *
 * Owns: the streaming hasher used by import, verify and pull, and the
 * one-shot helpers.  wstore__sha256_hex_str is declared in
 * backends/helpers.h (the file backend uses it too).
 */
#ifndef WSTORE_DIGEST_H
#define WSTORE_DIGEST_H

#include <stddef.h>

#include "backends/helpers.h"

typedef struct wstore__sha256 wstore__sha256;
wstore__sha256 *wstore__sha256_new(void);
void wstore__sha256_reset(wstore__sha256 *h);
void wstore__sha256_update(wstore__sha256 *h, const void *data, size_t len);
/* Finish and write lower-case hex (65 bytes incl. NUL); h can be reset. */
void wstore__sha256_hex(wstore__sha256 *h, char out[65]);
void wstore__sha256_free(wstore__sha256 *h);
/* One-shot raw digest. */
void wstore__sha256_once(unsigned char out[32], const void *data, size_t len);

#endif
