/*
 * sha256_get.c - GET one URL with libcurl and print the SHA-256 of its
 * body in hex: bench/mirror_stream.sh's floor, the least a cold mirror
 * must do with a file (take its bytes from the upstream, hash them all
 * before the last may go out), in one process and nothing else.
 *
 *   wstore-sha256-get [--inline] URL
 *
 * The receive is the mirror's: libcurl, 512 KiB a callback
 * (CURLOPT_BUFFERSIZE, as src/lib/hubfetch.c sets it); the hash is
 * libcrypto's EVP SHA-256, as wstore's, on a second thread fed through a
 * 1 MiB pipe, so receiving and hashing overlap on two cores as `curl URL
 * | sha256` would; with --inline, in the receiving thread (less work in
 * all, no overlap: the faster of the two on a busy machine).  Not the
 * pipeline itself: curl writes a pipe 16 KiB at a time and `openssl dgst`
 * reads it 8 KiB at a time, so it measures the tools (over 4 s for
 * 2.15 GB here, slower than the mirror), not the work.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#define BUF ((size_t)1 << 20)

static int pipefd[2];

/* the libcurl callback: the bytes into the pipe */
static size_t take(char *data, size_t size, size_t n, void *ctx)
{
	size_t len = size * n, done = 0;

	(void)ctx;
	while (done < len) {
		ssize_t w = write(pipefd[1], data + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0;
		done += (size_t)w;
	}
	return len;
}

/* --inline: the bytes hashed as they come */
static size_t take_inline(char *data, size_t size, size_t n, void *ctx)
{
	return EVP_DigestUpdate(ctx, data, size * n) ? size * n : 0;
}

/* the hashing thread: the pipe into SHA-256 until its end */
static void *hash(void *arg)
{
	EVP_MD_CTX *ctx = arg;
	unsigned char *buf = malloc(BUF);
	ssize_t n;

	while (buf && ((n = read(pipefd[0], buf, BUF)) > 0 ||
		       (n < 0 && errno == EINTR)))
		if (n > 0)
			EVP_DigestUpdate(ctx, buf, (size_t)n);
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char d[32];
	unsigned dn = 0;
	int in = argc == 3 && !strcmp(argv[1], "--inline");
	const char *url = argv[argc - 1];
	pthread_t t;
	CURLcode rc;
	CURL *c;

	if (argc != 2 && !in) {
		fprintf(stderr, "usage: wstore-sha256-get [--inline] URL\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
	    !(c = curl_easy_init()) ||
	    (!in &&
	     (pipe(pipefd) != 0 || pthread_create(&t, NULL, hash, ctx) != 0))) {
		fprintf(stderr, "sha256-get: cannot start\n");
		return 1;
	}
	if (!in)
		fcntl(pipefd[1], F_SETPIPE_SZ, (int)BUF);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, in ? take_inline : take);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, ctx);
	rc = curl_easy_perform(c);
	if (!in) {
		close(pipefd[1]);
		pthread_join(t, NULL);
	}
	if (rc != CURLE_OK) {
		fprintf(stderr, "sha256-get: %s: %s\n", url,
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
