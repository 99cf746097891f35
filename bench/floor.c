/*
 * floor.c - the floor of a pull: the work `wstore model pull` must do,
 * done with an engine's raw client and nothing else.  Every chunk of a
 * checkpoint (the keys wstore stored it under, from its manifest) is read
 * with the raw client, hashed with SHA-256 (OpenSSL's, as wstore's) unless
 * told not to (the floor of `pull --no-verify`), and pwritten at its
 * offset into a file of the same path under DEST, by THREADS threads;
 * every file is fsynced at the end.  bench/fleet runs one per node, all
 * nodes at once, beside the pulls, for the ratio pull / floor.
 *
 *   floor mooncake LIB MASTER METADATA LOCAL THREADS DEST VERIFY < PLAN
 *   floor redis HOST PORT THREADS DEST VERIFY < PLAN
 *   floor serve-mooncake LIB MASTER METADATA LOCAL ADDR PORT < PLAN
 *   floor serve-redis HOST PORT ADDR PORT < PLAN
 *
 * The serve modes are the floor of `wstore serve` in front of an engine:
 * an HTTP server on ADDR:PORT that answers a GET of
 * /{repo}/resolve/{rev}/{path} by reading each chunk of the file at path
 * with the raw client and sending it, a thread per connection, no hash,
 * no sharing of reads between requests; it prints "listening" and runs
 * until killed.
 *
 * PLAN: one line per chunk, "KEY OFFSET LENGTH FILESIZE PATH" (tab
 * separated; bench/fleet/plan.py makes it from `model inspect --json`).
 * VERIFY 1 hashes, 0 does not.  Mooncake: each thread get_into a
 * registered buffer of its own (huge pages, as wstore's).  Redis Cluster:
 * each thread a connection per master, a key sent to the master that owns
 * its slot (CLUSTER SLOTS once at start; no MOVED handling: the cluster
 * is stable while a floor runs; a server that is not a cluster holds
 * every slot).  A GET reads the value straight into the thread's buffer
 * (resp_get).  Prints "floor MiB/s x bytes n chunks c
 * secs s", the time from the first GET to the last fsync.
 * Build: cc -O2 -pthread -o floor bench/floor.c bench/mc_client.c
 * -ldl -lcrypto -lhiredis
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <malloc.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_client.h"

#define HUGE ((size_t)2 << 20)
#define MAX_FILES 4096
#define MAX_MASTERS 16

struct chunk {
	char *key;
	uint64_t off;
	size_t len;
	int fd; /* the output file (pull floors) */
};

/* serve: a file of the plan, its chunks g.c[first .. first + n) */
struct file {
	char *path;
	uint64_t size;
	size_t first, n;
};

/* serve: registered buffers not in use (Mooncake) */
struct buf {
	struct buf *next;
	char *mem;
};

static struct {
	int redis; /* else mooncake */
	struct mc_client mc;
	const char *host;
	int port;
	struct {
		char host[64];
		int port;
		int lo, hi; /* slots */
	} masters[MAX_MASTERS];
	int nmasters;
	int verify;
	struct chunk *c;
	size_t n, next, maxlen;
	int fds[MAX_FILES];
	int nfds;
	struct file files[MAX_FILES];
	int nfiles;
	struct buf *idle;
	int failed;
	pthread_mutex_t mu;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- Redis Cluster routing ------------------------------------------------
 */

/* CRC16-CCITT (XModem), the Redis Cluster key hash. */
static unsigned crc16(const char *p, size_t n)
{
	unsigned crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)p[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

static int slot_of(const char *key)
{
	const char *o = strchr(key, '{'), *c = o ? strchr(o + 1, '}') : NULL;

	if (o && c && c > o + 1)
		return (int)(crc16(o + 1, (size_t)(c - o - 1)) & 16383);
	return (int)(crc16(key, strlen(key)) & 16383);
}

static int load_slots(void)
{
	redisContext *c = redisConnect(g.host, g.port);
	redisReply *r = c && !c->err ? redisCommand(c, "CLUSTER SLOTS") : NULL;

	if (r && r->type == REDIS_REPLY_ERROR) {
		/* not a cluster: one server holds every slot */
		snprintf(g.masters[0].host, sizeof(g.masters[0].host), "%s",
			 g.host);
		g.masters[0].port = g.port;
		g.masters[0].lo = 0;
		g.masters[0].hi = 16383;
		g.nmasters = 1;
		freeReplyObject(r);
		redisFree(c);
		return 0;
	}
	if (!r || r->type != REDIS_REPLY_ARRAY) {
		fprintf(stderr, "floor: CLUSTER SLOTS failed\n");
		return 1;
	}
	for (size_t i = 0; i < r->elements && g.nmasters < MAX_MASTERS; i++) {
		redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
			continue;
		g.masters[g.nmasters].lo = (int)e->element[0]->integer;
		g.masters[g.nmasters].hi = (int)e->element[1]->integer;
		snprintf(g.masters[g.nmasters].host, sizeof(g.masters[0].host),
			 "%s", e->element[2]->element[0]->str);
		g.masters[g.nmasters].port =
			(int)e->element[2]->element[1]->integer;
		g.nmasters++;
	}
	freeReplyObject(r);
	redisFree(c);
	return g.nmasters == 0;
}

static int master_of(const char *key)
{
	int s = slot_of(key);

	for (int i = 0; i < g.nmasters; i++)
		if (s >= g.masters[i].lo && s <= g.masters[i].hi)
			return i;
	return -1;
}

/*
 * GET key on c into buf (cap bytes) with the bare protocol: the request
 * written, the "$N" line read, then the N bytes straight into buf (hiredis
 * would grow a buffer of its own and copy the value out of it).  The
 * value's length, or -1.
 */
static __thread char resp_err[64]; /* the last answer resp_get refused */

static int64_t resp_get(redisContext *c, const char *key, char *buf, size_t cap)
{
	char req[1200], line[64], crlf[2];
	size_t got = 0;
	int n = snprintf(req, sizeof(req), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n",
			 strlen(key), key);
	long long len;

	if (n <= 0 || (size_t)n >= sizeof(req) ||
	    send(c->fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		return -1;
	/* the "$N" line, a byte at a time: it is short */
	while (got < sizeof(line) - 1) {
		if (recv(c->fd, line + got, 1, 0) != 1)
			return -1;
		if (line[got++] == '\n')
			break;
	}
	line[got] = '\0';
	snprintf(resp_err, sizeof(resp_err), "%s", line);
	resp_err[strcspn(resp_err, "\r\n")] = '\0';
	if (line[0] != '$' || (len = atoll(line + 1)) < 0 ||
	    (uint64_t)len > cap)
		return -1;
	for (got = 0; got < (size_t)len;) {
		ssize_t r = recv(c->fd, buf + got, (size_t)len - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	for (got = 0; got < 2;) {
		ssize_t r = recv(c->fd, crlf + got, 2 - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return len;
}

/*
 * resp_get on the master of key's slot (conn[m], connected on first use),
 * or, when that master answers MOVED (the slot moved since CLUSTER SLOTS,
 * e.g. after a failover), on the node it names, once.
 */
static int64_t cluster_get(redisContext **conn, int m, const char *key,
			   char *buf, size_t cap)
{
	char host[64];
	int port;
	int64_t n;
	redisContext *c;

	if (!conn[m])
		conn[m] = redisConnect(g.masters[m].host, g.masters[m].port);
	if (!conn[m] || conn[m]->err)
		return -1;
	n = resp_get(conn[m], key, buf, cap);
	/* a failover under way: asked again for up to 60 s, as wstore's
	 * cluster client does */
	for (int i = 0; n < 0 && i < 600 &&
			(!strncmp(resp_err, "-CLUSTERDOWN", 12) ||
			 !strncmp(resp_err, "-TRYAGAIN", 9) ||
			 !strncmp(resp_err, "-LOADING", 8));
	     i++) {
		usleep(100000);
		n = resp_get(conn[m], key, buf, cap);
	}
	if (n >= 0 ||
	    sscanf(resp_err, "-MOVED %*d %63[^:]:%d", host, &port) != 2)
		return n;
	c = redisConnect(host, port);
	n = c && !c->err ? resp_get(c, key, buf, cap) : -1;
	if (c)
		redisFree(c);
	return n;
}

/* ---- the work -------------------------------------------------------------
 */

/* Hash (if verifying) and write len bytes of chunk c from p. */
static int hash_write(const struct chunk *c, const char *p, EVP_MD_CTX *md)
{
	unsigned char d[32];

	if (g.verify) {
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		EVP_DigestUpdate(md, p, c->len);
		EVP_DigestFinal_ex(md, d, NULL);
	}
	for (size_t done = 0; done < c->len;) {
		ssize_t w = pwrite(c->fd, p + done, c->len - done,
				   (off_t)(c->off + done));

		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

static int next_chunk(size_t *i)
{
	pthread_mutex_lock(&g.mu);
	*i = g.failed ? g.n : g.next++;
	pthread_mutex_unlock(&g.mu);
	return *i < g.n;
}

static void fail(size_t i, const char *why)
{
	fprintf(stderr, "floor: chunk '%s': %s\n", g.c[i].key, why);
	g.failed = 1;
}

static void *redis_worker(void *arg)
{
	redisContext *conn[MAX_MASTERS] = { 0 };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *buf = malloc(g.maxlen ? g.maxlen : 1);
	size_t i;

	(void)arg;
	while (buf && next_chunk(&i)) {
		int m = master_of(g.c[i].key);

		if (m < 0) {
			fail(i, "no master for its slot");
			break;
		}
		if (cluster_get(conn, m, g.c[i].key, buf, g.maxlen) !=
		    (int64_t)g.c[i].len)
			fail(i, resp_err[0] ? resp_err : "GET failed");
		else if (hash_write(&g.c[i], buf, md) != 0)
			fail(i, "cannot write");
	}
	for (int m = 0; m < MAX_MASTERS; m++)
		if (conn[m])
			redisFree(conn[m]);
	EVP_MD_CTX_free(md);
	free(buf);
	return NULL;
}

/*
 * get_into, tried again as wstore's backend does on a loaded machine: a
 * read slower than the master's lease (-707), a value being written
 * (-703), a failed transfer or master RPC (-800, -900, -901), for up to
 * 30 s with a growing pause.
 */
static int64_t mc_get(const char *key, char *buf, size_t cap)
{
	int64_t n = -1;
	double t0 = mcc_now();

	for (int i = 0; mcc_now() - t0 < 30; i++) {
		n = g.mc.get_into(g.mc.h, key, buf, cap);
		if (n != -707 && n != -703 && n != -800 && n != -900 &&
		    n != -901)
			break;
		usleep((useconds_t)(i < 10 ? 50000 * (i + 1) : 500000));
	}
	return n;
}

static void *mooncake_worker(void *arg)
{
	size_t cap = (g.maxlen + HUGE - 1) / HUGE * HUGE, i;
	char *buf = aligned_alloc(HUGE, cap);
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	(void)arg;
	if (buf)
		madvise(buf, cap, MADV_HUGEPAGE);
	if (!buf || !md || g.mc.reg(g.mc.h, buf, cap) != 0) {
		fprintf(stderr, "floor: cannot register a buffer\n");
		g.failed = 1;
		return NULL;
	}
	while (next_chunk(&i)) {
		int64_t n = mc_get(g.c[i].key, buf, cap);
		char why[64];

		snprintf(why, sizeof(why), "get_into failed (%lld)",
			 (long long)n);
		if (n != (int64_t)g.c[i].len)
			fail(i, why);
		else if (hash_write(&g.c[i], buf, md) != 0)
			fail(i, "cannot write");
	}
	EVP_MD_CTX_free(md);
	return NULL;
}

/* ---- the plan -------------------------------------------------------------
 */

/* The fd of path under dest, created and sized on first sight. */
static int out_file(const char *dest, const char *path, uint64_t size,
		    char *last, int *lastfd)
{
	char full[8200], *slash;
	int fd;

	if (strcmp(last, path) == 0)
		return *lastfd;
	snprintf(full, sizeof(full), "%s/%s", dest, path);
	for (slash = strchr(full + strlen(dest) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(full, 0755);
		*slash = '/';
	}
	fd = open(full, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0 || g.nfds >= MAX_FILES) {
		perror(full);
		return -1;
	}
	g.fds[g.nfds++] = fd;
	snprintf(last, 4096, "%s", path);
	*lastfd = fd;
	return fd;
}

static int add_file(const char *path, uint64_t size)
{
	struct file *f = g.nfiles ? &g.files[g.nfiles - 1] : NULL;

	if (f && strcmp(f->path, path) == 0) {
		f->n++;
		return 0;
	}
	if (g.nfiles >= MAX_FILES)
		return 1;
	f = &g.files[g.nfiles++];
	f->path = strdup(path);
	f->size = size;
	f->first = g.n;
	f->n = 1;
	return f->path == NULL;
}

/* The plan from stdin; the output files under dest (NULL: none). */
static int read_plan(const char *dest)
{
	char line[8192], key[1024], path[4096], last[4096] = "";
	unsigned long long off, len, size;
	int lastfd = -1;

	while (fgets(line, sizeof(line), stdin)) {
		struct chunk *c;

		if (sscanf(line, "%1023s %llu %llu %llu %4095[^\n]", key, &off,
			   &len, &size, path) != 5)
			continue;
		c = realloc(g.c, (g.n + 1) * sizeof(*g.c));
		if (!c)
			return 1;
		g.c = c;
		c += g.n;
		c->key = strdup(key);
		c->off = off;
		c->len = (size_t)len;
		c->fd = -1;
		if (add_file(path, size) != 0)
			return 1;
		if (dest)
			c->fd = out_file(dest, path, size, last, &lastfd);
		if (!c->key || (dest && c->fd < 0))
			return 1;
		if (c->len > g.maxlen)
			g.maxlen = c->len;
		g.n++;
	}
	return g.n == 0;
}

/* ---- serve: the floor of wstore serve --------------------------------------
 */

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A registered buffer of g.maxlen bytes or more (Mooncake), kept for
 * the next request when given back. */
static char *take_buf(void)
{
	size_t cap = (g.maxlen + HUGE - 1) / HUGE * HUGE;
	struct buf *b;
	char *mem;

	pthread_mutex_lock(&g.mu);
	b = g.idle;
	if (b)
		g.idle = b->next;
	pthread_mutex_unlock(&g.mu);
	if (b) {
		mem = b->mem;
		free(b);
		return mem;
	}
	mem = aligned_alloc(HUGE, cap);
	if (mem)
		madvise(mem, cap, MADV_HUGEPAGE);
	if (mem && g.mc.reg(g.mc.h, mem, cap) != 0) {
		free(mem);
		mem = NULL;
	}
	return mem;
}

static void give_buf(char *mem)
{
	struct buf *b = malloc(sizeof(*b));

	if (!b)
		return; /* lost: the process ends with the run */
	b->mem = mem;
	pthread_mutex_lock(&g.mu);
	b->next = g.idle;
	g.idle = b;
	pthread_mutex_unlock(&g.mu);
}

/* Read chunk i with the raw client and send it on fd. */
static int send_chunk(int fd, size_t i, redisContext **conn)
{
	const struct chunk *c = &g.c[i];
	int rc = -1;

	if (g.redis) {
		int m = master_of(c->key);
		char *b = malloc(g.maxlen ? g.maxlen : 1);

		if (b && m >= 0 &&
		    cluster_get(conn, m, c->key, b, g.maxlen) ==
			    (int64_t)c->len)
			rc = send_all(fd, b, c->len);
		free(b);
	} else {
		size_t cap = (g.maxlen + HUGE - 1) / HUGE * HUGE;
		char *b = take_buf();

		if (b && mc_get(c->key, b, cap) == (int64_t)c->len)
			rc = send_all(fd, b, c->len);
		if (b)
			give_buf(b);
	}
	return rc;
}

/* The file a request line "GET /{repo}/resolve/{rev}/{path} HTTP/1.1"
 * names, or NULL. */
static const struct file *requested(char *req)
{
	char *p = strstr(req, "/resolve/"), *sp;

	if (strncmp(req, "GET ", 4) != 0 || !p)
		return NULL;
	p = strchr(p + strlen("/resolve/"), '/');
	sp = p ? strchr(p, ' ') : NULL;
	if (!sp)
		return NULL;
	*sp = '\0';
	for (int i = 0; i < g.nfiles; i++)
		if (strcmp(g.files[i].path, p + 1) == 0)
			return &g.files[i];
	return NULL;
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	redisContext *conn[MAX_MASTERS] = { 0 };
	char req[8192], head[256];
	size_t got = 0;
	const struct file *f;

	while (got < sizeof(req) - 1) {
		ssize_t r = recv(fd, req + got, sizeof(req) - 1 - got, 0);

		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[got] = '\0';
	f = requested(req);
	if (!f) {
		const char *nf = "HTTP/1.1 404 Not Found\r\n"
				 "Content-Length: 0\r\n"
				 "Connection: close\r\n\r\n";

		send_all(fd, nf, strlen(nf));
	} else {
		snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n"
			 "Connection: close\r\n\r\n",
			 (unsigned long long)f->size);
		if (send_all(fd, head, strlen(head)) == 0)
			for (size_t i = f->first; i < f->first + f->n; i++)
				if (send_chunk(fd, i, conn) != 0)
					break;
	}
	for (int m = 0; m < MAX_MASTERS; m++)
		if (conn[m])
			redisFree(conn[m]);
	close(fd);
	return NULL;
}

static int serve(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons((uint16_t)port);
	if (ls < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(ls, 256) != 0) {
		perror("floor: listen");
		return 1;
	}
	printf("listening on %s:%d\n", addr, port);
	fflush(stdout);
	for (;;) {
		int c = accept(ls, NULL, NULL);
		pthread_t t;

		if (c < 0)
			continue;
		if (pthread_create(&t, NULL, conn_thread, (void *)(intptr_t)c))
			close(c);
		else
			pthread_detach(t);
	}
}

static int usage(void)
{
	fprintf(stderr,
		"usage: floor mooncake LIB MASTER METADATA LOCAL "
		"THREADS DEST VERIFY < PLAN\n"
		"       floor redis HOST PORT THREADS DEST VERIFY < PLAN\n");
	return 2;
}

int main(int argc, char **argv)
{
	pthread_t t[64];
	double t0, t1;
	uint64_t total = 0;
	int nt, a;

	/* freed memory kept in the process, as wstore's Redis backend does
	 * (each reply of a chunk is a fresh malloc of its size) */
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	mallopt(M_TOP_PAD, 256 << 20);
	if (argc == 8 && strcmp(argv[1], "serve-mooncake") == 0) {
		if (read_plan(NULL) != 0 ||
		    mcc_open(&g.mc, "floor", argv[2], argv[3], argv[4],
			     argv[5]) != 0)
			return 1;
		return serve(argv[6], atoi(argv[7]));
	}
	if (argc == 6 && strcmp(argv[1], "serve-redis") == 0) {
		g.redis = 1;
		g.host = argv[2];
		g.port = atoi(argv[3]);
		if (read_plan(NULL) != 0 || load_slots() != 0)
			return 1;
		return serve(argv[4], atoi(argv[5]));
	}
	if (argc == 9 && strcmp(argv[1], "mooncake") == 0) {
		a = 6;
	} else if (argc == 7 && strcmp(argv[1], "redis") == 0) {
		g.redis = 1;
		g.host = argv[2];
		g.port = atoi(argv[3]);
		a = 4;
	} else {
		return usage();
	}
	nt = atoi(argv[a]);
	g.verify = atoi(argv[a + 2]);
	if (nt < 1 || nt > 64 || read_plan(argv[a + 1]) != 0)
		return usage();
	if (g.redis ? load_slots() != 0
		    : mcc_open(&g.mc, "floor", argv[2], argv[3], argv[4],
			       argv[5]) != 0)
		return 1;
	t0 = mcc_now();
	for (int i = 0; i < nt; i++)
		if (pthread_create(&t[i], NULL,
				   g.redis ? redis_worker : mooncake_worker,
				   NULL) != 0)
			return 1;
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < g.nfds && !g.failed; i++)
		if (fsync(g.fds[i]) != 0)
			g.failed = 1;
	t1 = mcc_now();
	for (size_t i = 0; i < g.n; i++)
		total += g.c[i].len;
	if (g.failed)
		_exit(1);
	printf("floor MiB/s %.1f bytes %llu chunks %zu secs %.3f\n",
	       (double)total / (t1 - t0) / 1048576.0, (unsigned long long)total,
	       g.n, t1 - t0);
	fflush(stdout);
	/* no destroy (about 1 s, within the time measured from outside): the
	 * fleet bed's metadata server goes with the bed */
	_exit(0);
}
