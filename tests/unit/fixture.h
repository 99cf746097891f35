/*
 * fixture.h - what the unit tests build their cases from: files written
 * and compared, a store on the in-memory backend, and a checkpoint
 * imported from a small source directory (a safetensors shard with its
 * index, a config, a nested file, an empty one), or written by hand
 * straight into the backend.  fixture.c holds them; the CHECKs they make
 * count in the test that calls them.
 */
#ifndef WSTORE_UNIT_FIXTURE_H
#define WSTORE_UNIT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <wstore/wstore.h>

/* snprintf into an array, which must not truncate. */
#define PATHF(buf, ...)                                                        \
	do {                                                                   \
		if (snprintf(buf, sizeof(buf), __VA_ARGS__) >=                 \
		    (int)sizeof(buf))                                          \
			abort();                                               \
	} while (0)

/* ---- files --------------------------------------------------------------- */

/* Write n bytes of data to dir/name (CHECKed). */
void unit_spit(const char *dir, const char *name, const void *data, size_t n);
/* Whether dir/name exists (lstat: a dangling symlink does). */
int unit_exists(const char *dir, const char *name);
/* Number of entries of dir whose name contains s. */
int unit_count_names(const char *dir, const char *s);
/* Whether the file at path holds exactly the n bytes of data. */
int unit_same_file(const char *path, const void *data, size_t n);

/* ---- stores -------------------------------------------------------------- */

/* A store on the in-memory backend made with flags; without get_range
 * if no_range.  NULL on failure; wstore_free it. */
wstore_store *unit_mem_store(int no_range, unsigned flags);

/* ---- the checkpoint fixture ---------------------------------------------- */

/* Tensors of the synthetic shard besides "w": t00..t09. */
#define FIXTURE_NT 10

/* A valid safetensors file, malloc'ed: tensors t00..t09 (U8 [len]) and
 * "w" (F32 [4, 5]), data bytes (i * 31 + 7) & 255; *out_n its size,
 * *out_hdr the length of its JSON header. */
char *fixture_shard(size_t *out_n, size_t *out_hdr);
/* A fresh source directory (unit_tmpdir): model.safetensors (the shard,
 * returned in *shard, *shard_n), its index, config.json ({"a":1}),
 * sub/dir/x.bin (0123456789) and an empty empty.txt; caller frees. */
char *fixture_source(char **shard, size_t *shard_n);
/* Import src as checkpoint id of model test/model, chunk_size bytes a
 * chunk (0: the default), two jobs; the import's code. */
int fixture_import(wstore_store *s, const char *id, const char *src,
		   uint64_t chunk_size);

/* A memory store holding fixture_source imported as checkpoint "ck". */
struct fixture {
	wstore_store *s;
	char *src, *shard;
	size_t shard_n;
};

/* Fill fx (no_range and the chunk size cs as above); 0, or the failure
 * (CHECKed).  fixture_done frees it either way. */
int fixture_init(struct fixture *fx, int no_range, uint64_t cs);
void fixture_done(struct fixture *fx);

/* Rewrite every data file under the file store at root
 * (<ph>/data-<cs>) as the chunk files an older wstore wrote
 * (<ph>/chunks/<i>), removing it: the old layout, for tests of both.
 * The number of data files split, or -1 (CHECKed). */
int fixture_split_data_files(const char *root);
/* Key of chunk i of path in checkpoint id (out: WSTORE__KEY_MAX bytes). */
void fixture_chunk_key(char *out, const char *id, const char *path, uint64_t i);
/* Put a value straight into the backend under key (replacing it). */
void fixture_put_raw(wstore_store *s, const char *key, const void *v, size_t n);
/* Write a READY checkpoint by hand: one file, split into chunks of cs
 * bytes (the record claims chunk_size rec_cs). */
void fixture_put_by_hand(wstore_store *s, const char *id, const char *path,
			 const char *data, size_t n, size_t cs,
			 uint64_t rec_cs);

#endif
