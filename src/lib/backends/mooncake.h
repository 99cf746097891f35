/*
 * mooncake.h - what the Mooncake backend's files share (mooncake.c the
 * callbacks, the registered buffer pool and the waits; mooncake_open.c
 * loading the client library, the settings, reaching the master, the
 * client's setup and teardown, and the kind store URLs name).  Private to
 * them: the rest of the library sees the backend only through struct
 * wstore_backend.  Read mooncake.c's opening comment first.
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
	pthread_mutex_t lock;	   /* guards idle and lent */
	struct mc_buf *idle;	   /* registered buffers not in use */
	struct mc_buf *lent;	   /* registered buffers buf_alloc handed out */
};

/* ---- mooncake.c --------------------------------------------------------- */

/* Set the callbacks that move data (put, get, get_many, size, remove,
 * buf_alloc, buf_free); the constructor sets the rest. */
void mc_set_ops(struct mc_backend *b);
/* Unregister and free every pooled buffer, and those buf_alloc handed out
 * that the caller leaked; the client must still be there. */
void mc_pool_free(struct mc_backend *b);

#endif
