/*
 * mc_client.h - the raw Mooncake client the benchmarks and the fleet's
 * raw tools share (bench/mooncake_raw.c, bench/mooncake_floor.c,
 * bench/floor.c, tests/fleet/mc_replica.c): libmooncake_store.so loaded
 * with dlopen, as wstore loads it, the C API's functions found in it, and
 * a pure client (no segment of its own, a 128 MiB local buffer, TCP) set
 * up.  Build with bench/mc_client.c and -ldl.
 */
#ifndef WSTORE_BENCH_MC_CLIENT_H
#define WSTORE_BENCH_MC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Layout of Mooncake's replicate config, in this order. */
struct mcc_rcfg {
	size_t replica_num;
	int with_soft_pin;
	int with_hard_pin;
	const char **preferred_segments;
	size_t preferred_segments_count;
};

struct mc_client {
	void *dl;
	void *h; /* the client */
	void *(*create)(void);
	void (*destroy)(void *h);
	int (*setup)(void *h, const char *local_hostname,
		     const char *metadata_server, uint64_t global_segment_size,
		     uint64_t local_buffer_size, const char *protocol,
		     const char *device_name, const char *master_server_addr);
	int (*put_from)(void *h, const char *key, void *buf, size_t size,
			const struct mcc_rcfg *cfg);
	int64_t (*get_into)(void *h, const char *key, void *buf, size_t size);
	int (*reg)(void *h, void *buf, size_t size);
	int (*rm)(void *h, const char *key, int force);
};

/*
 * Load lib and set up a client of the master at master (HOST:PORT) with
 * metadata server meta, named local (Mooncake's local_hostname, e.g. the
 * fleet node's own address).  0, or 1 after a message on stderr that
 * starts with prog.
 */
int mcc_open(struct mc_client *c, const char *prog, const char *lib,
	     const char *master, const char *meta, const char *local);

/* Destroy the client (about 1 s): its name leaves the metadata server. */
void mcc_close(struct mc_client *c);

/* Seconds on the monotonic clock. */
double mcc_now(void);

#endif
