/*
 * mooncake.h - what the Mooncake backend's files share (mooncake.c the
 * callbacks and their waits; mooncake_fail.c its errors;
 * mooncake_pool.c the registered buffers;
 * mooncake_open.c loading the client library, the settings, reaching the
 * master, the client's setup and teardown, and the kind store URLs name;
 * mooncake_exit.c the client's name and its end when the process exits).
 * Private to them: the rest of the library sees the backend only through
 * struct wstore_backend.  Read mooncake.c's opening comment first.
 */
#ifndef WSTORE_BACKENDS_MOONCAKE_H
#define WSTORE_BACKENDS_MOONCAKE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "helpers.h"

/* Mooncake error codes (docs/mooncake.md). */
#define MC_INTERNAL (-1)
#define MC_NO_SPACE (-200)
#define MC_INVALID_PARAMS (-600)
#define MC_REPLICA_NOT_READY (-703)
#define MC_NOT_FOUND (-704)
#define MC_EXISTS (-705)
#define MC_LEASED (-706)
#define MC_LEASE_EXPIRED (-707) /* the read outlasted its lease */
#define MC_TRANSFER_FAIL (-800)
#define MC_RPC_FAIL (-900)
#define MC_RPC_TIMEOUT (-901)

/* Layout of Mooncake's replicate config, in this order. */
struct mc_replicate_config {
	size_t replica_num;
	int with_soft_pin;
	int with_hard_pin;
	const char **preferred_segments;
	size_t preferred_segments_count;
};

/* The functions of the C API that wstore uses. */
struct mc_api {
	void *(*create)(void);
	void (*destroy)(void *h);
	int (*setup)(void *h, const char *local_hostname,
		     const char *metadata_server, uint64_t global_segment_size,
		     uint64_t local_buffer_size, const char *protocol,
		     const char *device_name, const char *master_server_addr);
	int (*put_from)(void *h, const char *key, void *buf, size_t size,
			const struct mc_replicate_config *cfg);
	int64_t (*get_into)(void *h, const char *key, void *buf, size_t size);
	int (*batch_get_into)(void *h, const char **keys, void **bufs,
			      const size_t *sizes, size_t count,
			      int64_t *results);
	int64_t (*get_size)(void *h, const char *key);
	int (*remove)(void *h, const char *key, int force);
	int (*register_buffer)(void *h, void *buf, size_t size);
	int (*unregister_buffer)(void *h, void *buf);
};

/* A buffer registered with the client. */
struct mc_buf {
	struct mc_buf *next;
	void *mem;
	size_t cap;
};

struct mc_backend {
	wstore_backend base;
	struct mc_api api;
	void *dl;
	void *h;      /* client handle */
	char *master; /* master_server_addr, for messages */
	struct mc_replicate_config rcfg;
	uint64_t lease_wait_ms;
	uint64_t read_wait_ms;	   /* a get waiting out a put in progress */
	uint64_t write_wait_ms;	   /* a remove waiting out a dead writer */
	uint64_t transfer_wait_ms; /* retrying failed transfers (-800) */
	int connect_ms;		   /* bound on reaching the master at open */
	int rpc_ms;		   /* bound on one master RPC */
	int log_stderr;		   /* leave Mooncake's glog output on stderr */
	char *meta;		   /* metadata_server */
	char *name;	      /* the client's name there (HOST:PORT), or NULL */
	int name_fd;	      /* the socket holding PORT of name, or -1 */
	pthread_mutex_t lock; /* guards idle and lent */
	struct mc_buf *idle;  /* registered buffers not in use */
	struct mc_buf *lent;  /* registered buffers buf_alloc handed out */
};

/* ---- mooncake.c --------------------------------------------------------- */

/* Set the callbacks that move data (put, get, get_many, size, remove,
 * buf_alloc, buf_free); the constructor sets the rest. */
void mc_set_ops(struct mc_backend *b);

/* ---- mooncake_fail.c ---------------------------------------------------- */

/* Turn a negative Mooncake code from operation what ("read", ...) on key
 * into a wstore code and message; returns the wstore code. */
int mc_fail(struct mc_backend *b, int64_t rc, const char *what,
	    const char *key);

/* A retry of a failure that may pass (a failed transfer, a master RPC
 * failed or timed out): see mooncake_fail.c */
struct mc_retry {
	uint64_t start; /* of the first failure; 0 before one */
	uint64_t step;
};

#define MC_RETRY                                                               \
	{                                                                      \
		0, 50                                                          \
	}

/* After a failure that may pass: sleep one step and return 1 to try
 * again, or 0 when transfer_wait_ms have passed since the first failure
 * or the caller was interrupted. */
int mc_transfer_again(struct mc_backend *b, struct mc_retry *r);

/* Sleep ms milliseconds (a signal does not cut it short). */
void mc_sleep_ms(uint64_t ms);

/* ---- mooncake_pool.c ---------------------------------------------------- */

/* Take an idle registered buffer of at least need bytes (growing one if
 * none is big enough); give it back with mc_buf_put. */
int mc_buf_take(struct mc_backend *b, size_t need, struct mc_buf **out,
		const char *key);
void mc_buf_put(struct mc_backend *b, struct mc_buf *x);
/* The backend's buf_alloc and buf_free. */
void *mc_buf_alloc(wstore_backend *wb, size_t size);
void mc_buf_free(wstore_backend *wb, void *p);
/* Whether [p, p + n) lies in one buffer of mc_buf_alloc's. */
int mc_is_lent(struct mc_backend *b, const void *p, size_t n);
/* Unregister and free every pooled buffer, and those buf_alloc handed out
 * that the caller leaked; the client must still be there. */
void mc_pool_free(struct mc_backend *b);

/* ---- mooncake_exit.c ---------------------------------------------------- */

/* The local_hostname to give setup: local (the setting) with a port this
 * process holds bound (b->name_fd), so that the client's name on the
 * metadata server is known (b->name) and no other live process of this
 * host takes it.  NULL with no error when local cannot be bound here (or
 * names its own port): Mooncake then picks the port (or keeps it). */
char *mc_name_client(struct mc_backend *b, const char *local);
/* Forget the name (closing name_fd) after a failed setup. */
void mc_name_drop(struct mc_backend *b);
/* The backend's free_exiting: the client taken off the metadata server,
 * bounded in time, the rest left to the kernel. */
void mc_free_exiting(wstore_backend *wb);

#endif
