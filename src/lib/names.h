/*
 * names.h - ids, paths and the contract's key layout (names.c).
 *
 * Owns: the key builders of docs/format.md (manifest, file, chunk and
 * index keys) and the checks of ids and relative paths.  Nothing else in
 * the library spells a key.
 */
#ifndef WSTORE_NAMES_H
#define WSTORE_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define WSTORE__KEY_MAX 512

/* Keys of the contract, written into out (WSTORE__KEY_MAX bytes). */
void wstore__key_manifest(char *out, const char *ckpt);
void wstore__key_file(char *out, const char *ckpt, const char *path);
void wstore__key_chunk(char *out, const char *file_key, uint64_t i);
void wstore__key_models_index(char *out);
void wstore__key_model_index(char *out, const char *model_id);
/* Prefix of every key of a checkpoint ("weight/models/{ckpt}/"). */
void wstore__key_ckpt_prefix(char *out, const char *ckpt);
/* wstore's own: the import intent record of ckpt (intent.c). */
void wstore__key_intent(char *out, const char *ckpt);
/* wstore's own keys of read leases (docs/format.md, "Leases"): the lease
 * set "weight/leases/models/{ckpt}" (stores that cannot list), the prefix
 * of the per-holder records and one of them; and the pin and last-read
 * record "weight/meta/models/{ckpt}". */
void wstore__key_lease_set(char *out, const char *ckpt);
void wstore__key_lease_prefix(char *out, const char *ckpt);
void wstore__key_lease(char *out, const char *ckpt, const char *holder);
void wstore__key_meta(char *out, const char *ckpt);
/* wstore's own: the generation record of ckpt,
 * "weight/meta/generations/{ckpt}" (generation.c). */
void wstore__key_generation(char *out, const char *ckpt);

/* The largest value wstore reads whole under key, by the key's kind;
 * *out_kind (if not NULL) names the kind for messages ("manifest",
 * "index", "lease", "lock", ...).  store.c checks the size a backend
 * reports against it before it allocates. */
size_t wstore__key_value_max(const char *key, const char **out_kind);

/* 1 if s is well-formed UTF-8 (no overlongs, surrogates). */
int wstore__utf8_valid(const char *s);

/* "WEIGHT" or "METADATA" by suffix. */
const char *wstore__file_type(const char *path);

/* sorted (n paths in strcmp order, each valid): 0, or WSTORE_EINVAL
 * naming a path listed twice or a path that is also a directory of
 * another (a file store and a mount cannot hold both). */
int wstore__paths_fit(const char *const *sorted, size_t n);

/* A path an import may record: wstore_validate_path's rules (those of
 * every manifest), and no control character (C0, DEL), which a mount
 * would show and a listing would print as fake lines.  Manifests written
 * before keep theirs. */
int wstore__path_importable(const char *path);

#endif
