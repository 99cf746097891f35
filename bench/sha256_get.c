/*
 * sha256_get.c - GET one URL with libcurl and print the SHA-256 of its
 * body in hex: bench/mirror_stream.sh's floor, the least a cold mirror
 * must do with a file (take its bytes from the upstream, hash them all
 * before the last may go out), in one process and nothing else.
 *
 *   wstore-sha256-get URL
 *
 * The receive is the mirror's: libcurl, 512 KiB a callback
 * (CURLOPT_BUFFERSIZE, as src/lib/hubfetch.c sets it), the hash libcrypto's
 * EVP SHA-256, as wstore's, in the receiving thread.  Not `curl URL |
 * openssl dgst -sha256`: curl writes a pipe 16 KiB at a time and the CLI
 * reads it 8 KiB at a time, so that pipeline measures the tools (over
 * 4 s for 2.15 GB here, slower than the mirror itself), not the work.
 */
#include <stdio.h>

#include <curl/curl.h>
#include <openssl/evp.h>

static size_t take(char *data, size_t size, size_t n, void *ctx)
{
	return EVP_DigestUpdate(ctx, data, size * n) ? size * n : 0;
}

int main(int argc, char **argv)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char d[32];
	unsigned dn = 0;
	CURL *c;
	CURLcode rc;

	if (argc != 2) {
		fprintf(stderr, "usage: wstore-sha256-get URL\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
	    !(c = curl_easy_init())) {
		fprintf(stderr, "sha256-get: out of memory\n");
		return 1;
	}
	curl_easy_setopt(c, CURLOPT_URL, argv[1]);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, ctx);
	if ((rc = curl_easy_perform(c)) != CURLE_OK) {
		fprintf(stderr, "sha256-get: %s: %s\n", argv[1],
			curl_easy_strerror(rc));
		return 1;
	}
	EVP_DigestFinal_ex(ctx, d, &dn);
	for (unsigned i = 0; i < dn; i++)
		printf("%02x", d[i]);
	printf("\n");
	curl_easy_cleanup(c);
	EVP_MD_CTX_free(ctx);
	curl_global_cleanup();
	return 0;
}
