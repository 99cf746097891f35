/*
 * mooncake_floor.c - the floor of an import into Mooncake, with the raw C
 * API: every chunk of the given files read from the page cache, hashed
 * with SHA-256 and put_from a registered buffer, by THREADS threads of one
 * process (as many as the import runs), in chunks of MIB MiB as the
 * import cuts them.  Each thread registers one chunk buffer once (huge
 * pages, as wstore's; FLOOR_NO_THP=1 for 4 KiB pages) and reuses it; it
 * reads and hashes a chunk in 512 KiB pieces (each hashed while in the
 * CPU cache), then puts it.  Like wstore, the process
 * ends with _exit and no mooncake_store_destroy (a pure client gives
 * nothing back to the cluster by destroying).
 *
 *   mooncake_floor LIBRARY MASTER METADATA MIB THREADS PREFIX put FILE...
 *   mooncake_floor LIBRARY MASTER METADATA MIB THREADS PREFIX get FILE...
 *   mooncake_floor LIBRARY MASTER METADATA MIB THREADS PREFIX rm FILE...
 *
 * "put" stores the chunks under PREFIX<n> and prints "floor put x GB/s
 * (transfers) setup s"; time the whole process from outside for the
 * figure to compare with a whole wstore command.  "rm" removes them again.
 * "get" is the floor of a pull of what put stored: each chunk get_into a
 * registered buffer and pwritten at its offset into a file of the same
 * name in $FLOOR_DEST (created, truncated to size), every file fsynced
 * at the end; FLOOR_HASH=1 also hashes each chunk (a verified pull).
 * Build: cc -O2 -pthread -o mooncake_floor bench/mooncake_floor.c
 * bench/mc_client.c -ldl -lcrypto
 */
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mc_client.h"

#define PIECE ((size_t)512 << 10)
#define HUGE ((size_t)2 << 20)

struct chunk {
	int fd;
	int out; /* get: the file in $FLOOR_DEST */
	uint64_t off;
	size_t len;
};

static struct {
	struct mc_client mc;
	int get;  /* the get mode */
	int hash; /* get: hash each chunk too */
	const char *dest;
	int outs[256];
	int nouts;
	const char *prefix;
	size_t chunk;
	struct chunk *c;
	size_t n, next;
	int failed;
	int thp;
	pthread_mutex_t mu;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

#define now_s mcc_now

static int read_hash(const struct chunk *c, char *buf, EVP_MD_CTX *md)
{
	unsigned char d[32];

	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (size_t done = 0; done < c->len;) {
		size_t k = c->len - done < PIECE ? c->len - done : PIECE;
		ssize_t r = pread(c->fd, buf + done, k, (off_t)(c->off + done));

		if (r <= 0)
			return -1;
		EVP_DigestUpdate(md, buf + done, (size_t)r);
		done += (size_t)r;
	}
	EVP_DigestFinal_ex(md, d, NULL);
	return 0;
}

/* get: chunk c from key into buf, then its place in the output file */
static int get_write(const struct chunk *c, const char *key, char *buf,
		     size_t cap, EVP_MD_CTX *md)
{
	int64_t n = g.mc.get_into(g.mc.h, key, buf, cap);
	unsigned char d[32];

	if (n != (int64_t)c->len)
		return -1;
	if (g.hash) {
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		EVP_DigestUpdate(md, buf, c->len);
		EVP_DigestFinal_ex(md, d, NULL);
	}
	for (size_t done = 0; done < c->len;) {
		ssize_t w = pwrite(c->out, buf + done, c->len - done,
				   (off_t)(c->off + done));

		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct mcc_rcfg cfg = { 1, 0, 1, NULL, 0 };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t cap = (g.chunk + HUGE - 1) / HUGE * HUGE, i;
	char *buf = aligned_alloc(HUGE, cap), key[64];

	(void)arg;
	/* huge pages, unless told not to: fresh memory costs a page fault
	 * per 4 KiB on first touch otherwise */
	if (buf && g.thp)
		madvise(buf, cap, MADV_HUGEPAGE);
	if (!md || !buf || g.mc.reg(g.mc.h, buf, cap) != 0) {
		fprintf(stderr, "mooncake_floor: cannot register a buffer\n");
		g.failed = 1;
		return NULL;
	}
	for (;;) {
		pthread_mutex_lock(&g.mu);
		i = g.failed ? g.n : g.next++;
		pthread_mutex_unlock(&g.mu);
		if (i >= g.n)
			break;
		snprintf(key, sizeof(key), "%s%zu", g.prefix, i);
		if (g.get ? get_write(&g.c[i], key, buf, cap, md) != 0
			  : (read_hash(&g.c[i], buf, md) != 0 ||
			     g.mc.put_from(g.mc.h, key, buf, g.c[i].len,
					   &cfg) != 0)) {
			fprintf(stderr, "mooncake_floor: chunk %zu failed\n",
				i);
			g.failed = 1;
		}
	}
	EVP_MD_CTX_free(md);
	return NULL;
}

/* Cut every file into chunks of g.chunk bytes, as the import does. */
static int plan(char **files, int nfiles)
{
	g.c = NULL;
	g.n = 0;
	for (int f = 0; f < nfiles; f++) {
		int fd = open(files[f], O_RDONLY), out = -1;
		struct stat st;
		char path[4096];
		const char *base = strrchr(files[f], '/');

		if (fd < 0 || fstat(fd, &st) != 0) {
			perror(files[f]);
			return -1;
		}
		if (g.get) {
			snprintf(path, sizeof(path), "%s/%s", g.dest,
				 base ? base + 1 : files[f]);
			out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (out < 0 || ftruncate(out, st.st_size) != 0 ||
			    g.nouts >= 256) {
				perror(path);
				return -1;
			}
			g.outs[g.nouts++] = out;
		}
		for (uint64_t off = 0; off < (uint64_t)st.st_size;
		     off += g.chunk) {
			uint64_t left = (uint64_t)st.st_size - off;

			g.c = realloc(g.c, (g.n + 1) * sizeof(*g.c));
			if (!g.c)
				return -1;
			g.c[g.n++] =
				(struct chunk){ fd, out, off,
						left < g.chunk ? (size_t)left
							       : g.chunk };
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	double t0 = now_s(), t1, t2;
	uint64_t total = 0;
	pthread_t t[64];
	int nt;

	if (argc < 9 || (strcmp(argv[7], "put") && strcmp(argv[7], "get") &&
			 strcmp(argv[7], "rm"))) {
		fprintf(stderr, "usage: mooncake_floor LIBRARY MASTER METADATA "
				"MIB THREADS PREFIX put|get|rm FILE...\n");
		return 2;
	}
	g.get = strcmp(argv[7], "get") == 0;
	g.hash = getenv("FLOOR_HASH") && !strcmp(getenv("FLOOR_HASH"), "1");
	g.dest = getenv("FLOOR_DEST");
	if (g.get && !g.dest) {
		fprintf(stderr, "mooncake_floor: get needs FLOOR_DEST\n");
		return 2;
	}
	g.chunk = strtoull(argv[4], NULL, 10) << 20;
	nt = atoi(argv[5]);
	g.prefix = argv[6];
	g.thp = !getenv("FLOOR_NO_THP");
	if (nt < 1 || nt > 64 || !g.chunk || plan(argv + 8, argc - 8) != 0)
		return 2;
	if (mcc_open(&g.mc, "mooncake_floor", argv[1], argv[2], argv[3],
		     "127.0.0.1") != 0)
		return 1;
	t1 = now_s();
	if (strcmp(argv[7], "rm") == 0) {
		char key[64];

		for (size_t i = 0; i < g.n; i++) {
			snprintf(key, sizeof(key), "%s%zu", g.prefix, i);
			g.mc.rm(g.mc.h, key, 1);
		}
		fflush(stdout);
		_exit(0);
	}
	for (int i = 0; i < nt; i++)
		if (pthread_create(&t[i], NULL, worker, NULL) != 0)
			return 1;
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < g.nouts && !g.failed; i++)
		if (fsync(g.outs[i]) != 0)
			g.failed = 1;
	t2 = now_s();
	for (size_t i = 0; i < g.n; i++)
		total += g.c[i].len;
	if (g.failed)
		_exit(1);
	printf("floor %s %.2f GB/s (transfers)  setup %.3f s  %zu chunks\n",
	       argv[7], total / (t2 - t1) / 1e9, t1 - t0, g.n);
	fflush(stdout);
	_exit(0);
}
