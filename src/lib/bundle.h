/*
 * bundle.h - bundles inside the library (bundle.c; the public calls,
 * wstore_export and wstore_import_bundle, are in wstore/wstore.h): the
 * import of a bundle stream that copy.c feeds from another store.
 */
#ifndef WSTORE_BUNDLE_H
#define WSTORE_BUNDLE_H

#include "wstore/wstore.h"

/* wstore_import_bundle, with what naming the stream in messages ("the
 * bundle", "the copy of 'x' from 'redis://...'"). */
int wstore__import_bundle_from(char **out_id, wstore_store *s, int fd,
			       const wstore_import_options *opts,
			       const char *what);

/* wstore_export, hashing each file as it is read only with verify: a
 * reader that checks every byte itself (a copy's importer) needs no
 * second hash on the way out. */
int wstore__export(wstore_store *s, const char *id, int fd, const char *output,
		   const wstore_export_options *opts, int verify);

#endif
