/*
 * mooncake_open.c - making and ending a Mooncake Store backend: the
 * settings (config keys and WSTORE_MOONCAKE_* variables), loading
 * libmooncake_store.so with dlopen and finding the C API's functions in
 * it, quieting its logging, a bounded TCP probe of the master before
 * Mooncake's own setup (which retries for ~90 s), the client's setup and
 * teardown, and the kind store URLs name ("mooncake", "mooncake://H:P").
 * What the backend does once open is in mooncake.c.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "mooncake.h"

#define MC_DEFAULT_LIBRARY "libmooncake_store.so"
#define MC_LOCAL_BUFFER (128ull << 20)
#define MC_LEASE_WAIT_MS 12000
/* a live writer finishes a put in well under this */
#define MC_READ_WAIT_MS 3000
/* the master discards a dead writer's put some seconds after its
 * put_start_discard_timeout_sec (30 s by default) */
#define MC_WRITE_WAIT_MS 60000
/* a dead storage node fails transfers until the master drops it (its
 * client_ttl, 10 s by default) */
#define MC_TRANSFER_WAIT_MS 30000
#define MC_CONNECT_TIMEOUT_MS 3000
/* bound on one master RPC (Mooncake's own default is 30 s) */
#define MC_RPC_TIMEOUT_MS 10000
/* setup attempts (Mooncake's own default) */
#define MC_SETUP_ATTEMPTS 20
/* glog's minimum level (gflags variable fLI::FLAGS_minloglevel) */
#define MC_GLOG_MINLEVEL "_ZN3fLI17FLAGS_minloglevelE"
#define MC_GLOG_FATAL 3

static const struct {
	const char *name;
	size_t off;
} mc_symbols[] = {
	{ "mooncake_store_create", offsetof(struct mc_api, create) },
	{ "mooncake_store_destroy", offsetof(struct mc_api, destroy) },
	{ "mooncake_store_setup", offsetof(struct mc_api, setup) },
	{ "mooncake_store_put_from", offsetof(struct mc_api, put_from) },
	{ "mooncake_store_get_into", offsetof(struct mc_api, get_into) },
	{ "mooncake_store_batch_get_into",
	  offsetof(struct mc_api, batch_get_into) },
	{ "mooncake_store_get_size", offsetof(struct mc_api, get_size) },
	{ "mooncake_store_remove", offsetof(struct mc_api, remove) },
	{ "mooncake_store_register_buffer",
	  offsetof(struct mc_api, register_buffer) },
	{ "mooncake_store_unregister_buffer",
	  offsetof(struct mc_api, unregister_buffer) },
};

static void mc_free(wstore_backend *wb)
{
	struct mc_backend *b = (struct mc_backend *)wb;

	if (!b)
		return;
	mc_pool_free(b);
	if (b->h)
		b->api.destroy(b->h);
	/* loaded with RTLD_NODELETE: a C++ client may leave thread-local
	 * state behind whose destructors must find the code still mapped */
	if (b->dl)
		dlclose(b->dl);
	pthread_mutex_destroy(&b->lock);
	mc_name_drop(b);
	free(b->meta);
	free(b->master);
	free(b);
}

static const char *cfg_str(const wstore_config *cfg, const char *key,
			   const char *def)
{
	const char *v = cfg ? wstore_config_get(cfg, key) : NULL;

	return v && *v ? v : def;
}

static int mc_load(struct mc_backend *b, const char *lib)
{
	dlerror();
	b->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!b->dl)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot load mooncake "
				   "client library '%s': %s",
				   lib, dlerror());
	for (size_t i = 0; i < sizeof(mc_symbols) / sizeof(*mc_symbols); i++) {
		void *sym = dlsym(b->dl, mc_symbols[i].name);

		if (!sym)
			return wstore__err(WSTORE_EUNAVAIL,
					   "mooncake client "
					   "library '%s' lacks symbol '%s'",
					   lib, mc_symbols[i].name);
		/* POSIX: function and object pointers have the same size */
		memcpy((char *)&b->api + mc_symbols[i].off, &sym, sizeof(sym));
	}
	return 0;
}

/* ---- signals, logging, reaching the master ----------------------------- */

/*
 * Mooncake logs through glog to stderr (dozens of lines per command, and
 * an "error" for every client start).  Unless mooncake_log is "stderr",
 * glog's minimum level is raised to FATAL right after loading, before
 * Mooncake logs anything; Mooncake's own MC_LOG_LEVEL, read when the
 * library loads, does not override it.  A library without the variable
 * (another glog) is left alone.
 */
static void mc_logging(struct mc_backend *b)
{
	int *minlevel;

	if (b->log_stderr)
		return;
	minlevel = dlsym(b->dl, MC_GLOG_MINLEVEL);
	if (minlevel)
		*minlevel = MC_GLOG_FATAL;
}

/* Split "host:port" or "[v6]:port"; 0 when addr has another form (an
 * etcd:// or other high-availability address is left to Mooncake). */
static int split_hostport(const char *addr, char *host, size_t hcap, char *port,
			  size_t pcap)
{
	const char *colon = strrchr(addr, ':'), *h = addr;
	size_t hl;

	if (!colon || strstr(addr, "://") || strchr(addr, ';') ||
	    strchr(addr, ','))
		return 0;
	hl = (size_t)(colon - addr);
	if (*h == '[' && hl >= 2 && h[hl - 1] == ']')
		h++, hl -= 2;
	if (hl == 0 || hl >= hcap || strlen(colon + 1) >= pcap || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return 0;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	return 1;
}

/* Connect to one address within ms: 0, or an errno value. */
static int try_connect(const struct addrinfo *ai, int ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			ai->ai_protocol),
	    err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return errno;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		err = errno;
		if (err == EINPROGRESS) {
			p.fd = fd;
			p.events = POLLOUT;
			err = poll(&p, 1, ms) == 1 ? 0 : ETIMEDOUT;
			if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					       &len) != 0)
				err = errno;
		}
	}
	close(fd);
	return err;
}

/*
 * Mooncake's setup retries an unreachable master for about 90 s.  A TCP
 * connect to the master's RPC port first, bounded by connect_timeout_ms,
 * turns that into one clear error within seconds.
 */
static int mc_probe_master(struct mc_backend *b)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char host[256], port[16];
	int rc, err = ENOENT;

	if (!split_hostport(b->master, host, sizeof(host), port, sizeof(port)))
		return 0;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': %s",
				   b->master, gai_strerror(rc));
	for (struct addrinfo *ai = res; ai && err; ai = ai->ai_next)
		err = try_connect(ai, b->connect_ms);
	freeaddrinfo(res);
	if (err == ETIMEDOUT)
		return wstore__err(
			WSTORE_EUNAVAIL,
			"cannot connect to mooncake master '%s': "
			"no answer within %d ms (connect_timeout_ms)",
			b->master, b->connect_ms);
	if (err) {
		char why[128];

		snprintf(why, sizeof(why), "%s", strerror(err));
		why[0] = (char)tolower((unsigned char)why[0]);
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': %s",
				   b->master, why);
	}
	return 0;
}

/* ---- settings ---------------------------------------------------------- */

/*
 * An address of neither form HOST:PORT nor one Mooncake's high
 * availability takes (etcd://..., a ';' or ',' list) sends setup into 90 s
 * of retries before "setup failed": say what is wrong at once instead.
 */
static int mc_check_master(const char *addr)
{
	char host[256], port[16];
	unsigned long n;

	if (strstr(addr, "://") || strchr(addr, ';') || strchr(addr, ','))
		return 0;
	if (split_hostport(addr, host, sizeof(host), port, sizeof(port)) &&
	    !strpbrk(host, " \t") && (n = strtoul(port, NULL, 10)) >= 1 &&
	    n <= 65535)
		return 0;
	return wstore__err(WSTORE_EINVAL,
			   "invalid master_server_addr '%s': want HOST:PORT "
			   "(the master's rpc_port, 50051 by default)",
			   addr);
}

/* Options Mooncake would only reject after connecting, or not at all. */
static int mc_check_options(struct mc_backend *b, const wstore_config *cfg)
{
	const char *proto = cfg_str(cfg, "protocol", "tcp");
	const char *log = cfg_str(cfg, "mooncake_log", "off");
	const char *ms = cfg_str(cfg, "connect_timeout_ms", NULL);

	if (strcmp(proto, "tcp") != 0 && strcmp(proto, "rdma") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid protocol '%s': want 'tcp' or "
				   "'rdma'",
				   proto);
	if (strcmp(log, "off") != 0 && strcmp(log, "stderr") != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid mooncake_log '%s': want 'off' or "
				   "'stderr'",
				   log);
	b->log_stderr = strcmp(log, "stderr") == 0;
	/* the config layer has checked they are positive integers */
	b->connect_ms = ms ? atoi(ms) : MC_CONNECT_TIMEOUT_MS;
	ms = cfg_str(cfg, "command_timeout_ms", NULL);
	b->rpc_ms = ms ? atoi(ms) : MC_RPC_TIMEOUT_MS;
	if (!*b->master)
		return wstore__err(WSTORE_EINVAL,
				   "master_server_addr must not be empty");
	return mc_check_master(b->master);
}

static int mc_settings(struct mc_backend *b, const wstore_config *cfg)
{
	const char *rn = cfg_str(cfg, "replica_num", "1");
	const char *wait = getenv("WSTORE_MOONCAKE_LEASE_WAIT_MS");
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(rn, &end, 10);
	if (errno || *end || n < 1 || n > 1000 || *rn == '-')
		return wstore__err(WSTORE_EINVAL,
				   "invalid replica_num '%s': "
				   "want an integer from 1 to 1000",
				   rn);
	b->rcfg.replica_num = n;
	b->rcfg.with_soft_pin = 0;
	b->rcfg.with_hard_pin = 1;
	b->lease_wait_ms = MC_LEASE_WAIT_MS;
	if (wait && *wait)
		b->lease_wait_ms = strtoull(wait, NULL, 10);
	b->read_wait_ms = MC_READ_WAIT_MS;
	b->write_wait_ms = MC_WRITE_WAIT_MS;
	wait = getenv("WSTORE_MOONCAKE_WRITE_WAIT_MS");
	if (wait && *wait)
		b->write_wait_ms = strtoull(wait, NULL, 10);
	b->transfer_wait_ms = MC_TRANSFER_WAIT_MS;
	wait = getenv("WSTORE_MOONCAKE_TRANSFER_WAIT_MS");
	if (wait && *wait)
		b->transfer_wait_ms = strtoull(wait, NULL, 10);
	b->master =
		strdup(cfg_str(cfg, "master_server_addr", "127.0.0.1:50051"));
	b->meta = strdup(cfg_str(cfg, "metadata_server", "P2PHANDSHAKE"));
	if (!b->master || !b->meta)
		return wstore__errc(-ENOMEM, "cannot open mooncake store");
	return mc_check_options(b, cfg);
}

/*
 * Mooncake's calls block in the library, out of wstore_interrupt's reach;
 * what bounds them is Mooncake's own environment, read by the client:
 * each master RPC gives up after MC_RPC_TIMEOUT_MS (30 s by default; here
 * command_timeout_ms, 10 s by default).  Setup attempts are wstore's
 * (mc_setup), so Mooncake's own (MC_STORE_CLIENT_SETUP_RETRIES, 20) are
 * set to one.  Values the user put in the environment win; ours follow
 * each open's config.
 */
static const char *const mc_bound_vars[] = { "MC_RPC_TIMEOUT_MS",
					     "MC_RPC_CONNECT_TIMEOUT_MS",
					     "MC_STORE_CLIENT_SETUP_RETRIES" };
static int mc_bound_ours[3]; /* set by wstore, not the user */
static pthread_once_t mc_bound_once = PTHREAD_ONCE_INIT;

static void mc_bound_init(void)
{
	for (int i = 0; i < 3; i++)
		mc_bound_ours[i] = !getenv(mc_bound_vars[i]);
}

static void mc_bound_rpcs(const struct mc_backend *b)
{
	char v[3][24];

	pthread_once(&mc_bound_once, mc_bound_init);
	snprintf(v[0], sizeof(v[0]), "%d", b->rpc_ms);
	snprintf(v[1], sizeof(v[1]), "%d", b->connect_ms);
	snprintf(v[2], sizeof(v[2]), "1");
	for (int i = 0; i < 3; i++)
		if (mc_bound_ours[i])
			setenv(mc_bound_vars[i], v[i], 1);
}

/*
 * Make the client, under a name mc_name_client chose (a port this process
 * holds).  A setup that fails fast is retried with a new client and a new
 * name: one fails when a client that exited without destroy (one that was
 * killed, or a wstore before this one) left its name registered on the
 * metadata server ("Duplicate rpc_meta key").  One
 * that fails after half an RPC timeout or more met a port that accepts but
 * does not answer as the master (a typo: the metadata server's port), and
 * is not retried: 10 s, where Mooncake's own retries took 10 minutes.
 */
static int mc_setup(struct mc_backend *b, const wstore_config *cfg,
		    uint64_t local)
{
	const char *host = cfg_str(cfg, "local_hostname", "localhost");
	uint64_t t0;
	int rc = -1, i;
	char *name;

	for (i = 0; i < MC_SETUP_ATTEMPTS && rc != 0; i++) {
		if (!(b->h = b->api.create()))
			return wstore__err(WSTORE_EUNAVAIL,
					   "cannot create a mooncake client "
					   "for master '%s'",
					   b->master);
		t0 = wclock_mono_ms();
		name = mc_name_client(b, host);
		/* a pure client: global_segment_size 0, no memory given */
		rc = b->api.setup(b->h, name ? name : host, b->meta, 0, local,
				  cfg_str(cfg, "protocol", "tcp"),
				  cfg_str(cfg, "rdma_devices", ""), b->master);
		free(name);
		if (rc == 0)
			break;
		b->api.destroy(b->h); /* a client that failed setup: ~2 ms */
		b->h = NULL;
		if ((wclock_mono_ms() - t0) * 2 >= (uint64_t)b->rpc_ms)
			return wstore__err(
				WSTORE_EUNAVAIL,
				"cannot connect to mooncake master '%s': no "
				"answer to setup within %d ms "
				"(command_timeout_ms): is it the master's "
				"rpc_port?",
				b->master, b->rpc_ms);
	}
	if (rc != 0)
		return wstore__err(WSTORE_EUNAVAIL,
				   "cannot connect to mooncake master '%s': "
				   "setup failed (%d) %d times",
				   b->master, rc, i);
	return 0;
}

static int mc_connect(struct mc_backend *b, const wstore_config *cfg)
{
	const char *env = getenv("WSTORE_MOONCAKE_LOCAL_BUFFER_SIZE");
	uint64_t local = MC_LOCAL_BUFFER;
	int rc;

	if (env && *env && wstore_parse_size(&local, env) != 0)
		return wstore__err(WSTORE_EINVAL,
				   "invalid "
				   "WSTORE_MOONCAKE_LOCAL_BUFFER_SIZE '%s'",
				   env);
	rc = mc_probe_master(b);
	if (rc != 0)
		return rc;
	mc_bound_rpcs(b);
	return mc_setup(b, cfg, local);
}

int wstore__backend_mooncake_open(wstore_backend **out,
				  const wstore_config *cfg)
{
	struct mc_backend *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return wstore__errc(-ENOMEM, "cannot open mooncake store");
	pthread_mutex_init(&b->lock, NULL);
	b->name_fd = -1;
	rc = mc_settings(b, cfg);
	if (rc == 0)
		rc = mc_load(b, cfg_str(cfg, "mooncake_library",
					MC_DEFAULT_LIBRARY));
	if (rc == 0) {
		mc_logging(b);
		rc = mc_connect(b, cfg);
	}
	if (rc != 0) {
		mc_free(&b->base);
		return rc;
	}
	b->base.version = WSTORE_BACKEND_VERSION;
	b->base.struct_size = sizeof(b->base);
	b->base.retry_ms = b->transfer_wait_ms;
	b->base.name = "mooncake";
	b->base.flags = WSTORE_BACKEND_WRITE_ONCE |
			WSTORE_BACKEND_EMPTY_MISSING | WSTORE_BACKEND_UNTRUSTED;
	mc_set_ops(b);
	b->base.free = mc_free;
	b->base.free_exiting = mc_free_exiting;
	*out = &b->base;
	return 0;
}

/* ---- the kind store URLs name (backends/table.c) ------------------------ */

/* "mooncake" (settings from the config) or "mooncake://HOST:PORT",
 * shorthand for the setting master_server_addr. */
static int mooncake_kind_open(wstore_backend **out, const char *url,
			      const char *rest, const wstore_config *cfg,
			      unsigned flags)
{
	wstore_config *c = NULL;
	int rc;

	(void)flags;
	if (strcmp(url, "mooncake") == 0)
		return wstore__backend_mooncake_open(out, cfg);
	rc = wstore_config_new(&c);
	if (rc == 0 && cfg)
		rc = wstore_config_merge(c, cfg);
	if (rc == 0 && *rest)
		rc = wstore_config_set(c, "master_server_addr", rest);
	if (rc == 0)
		rc = wstore__backend_mooncake_open(out, c);
	wstore_config_free(c);
	return rc;
}

const wstore__backend_kind wstore__kind_mooncake = {
	.name = "Mooncake",
	.schemes = { "mooncake", "mooncake://*" },
	.usage = "mooncake",
	.open = mooncake_kind_open,
};
