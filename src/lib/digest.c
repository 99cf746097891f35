/*
 * digest.c - SHA-256 through OpenSSL's EVP interface.
 *
 * EVP picks the SHA-NI / AVX code paths at run time, several times faster
 * than a portable C implementation (docs/performance.md).  Hashing is the
 * floor of import and verified reads, so never replace this with
 * hand-written code.
 */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "error.h"

struct wstore__sha256 {
	EVP_MD_CTX *ctx;
};

static void to_hex(char out[65], const unsigned char d[32])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[64] = '\0';
}

wstore__sha256 *wstore__sha256_new(void)
{
	wstore__sha256 *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || !EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL)) {
		wstore__sha256_free(h);
		return NULL;
	}
	return h;
}

void wstore__sha256_reset(wstore__sha256 *h)
{
	EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void wstore__sha256_update(wstore__sha256 *h, const void *data, size_t len)
{
	EVP_DigestUpdate(h->ctx, data, len);
}

void wstore__sha256_hex(wstore__sha256 *h, char out[65])
{
	unsigned char d[32];
	unsigned int n = 0;

	EVP_DigestFinal_ex(h->ctx, d, &n);
	to_hex(out, d);
	wstore__sha256_reset(h);
}

void wstore__sha256_free(wstore__sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

void wstore__sha256_once(unsigned char out[32], const void *data, size_t len)
{
	unsigned int n = 0;

	EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

void wstore__sha256_hex_str(char out[65], const char *s)
{
	unsigned char d[32];

	wstore__sha256_once(d, s, strlen(s));
	to_hex(out, d);
}
