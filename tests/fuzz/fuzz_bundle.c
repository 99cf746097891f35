/*
 * fuzz_bundle.c - libFuzzer target for the bundle reader (bundle.c,
 * tar.c): the input is a bundle, imported into a file store in a temp
 * directory (made once), then deleted.  Whatever it holds, the import
 * either succeeds with a checkpoint that verifies, or fails leaving
 * nothing READY.  Seeds in
 * tests/fuzz/corpus/bundle/ (small bundles of `wstore model export`).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wstore/wstore.h"

static wstore_store *store(void)
{
	static wstore_store *s;
	char dir[] = "/tmp/wstore-fuzz-bundle-XXXXXX";

	if (!s && (!mkdtemp(dir) || wstore_open_url(&s, dir) != 0))
		abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wstore_store *s = store();
	char *id = NULL, **ids = NULL;
	size_t n = 0;
	int fd = memfd_create("bundle", MFD_CLOEXEC), rc;

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) ||
	    lseek(fd, 0, SEEK_SET) != 0)
		abort();
	rc = wstore_import_bundle(&id, s, fd, NULL);
	if (rc == 0 && wstore_verify(s, id, NULL) != 0)
		abort();
	if (wstore_list(&ids, &n, s) != 0 || n != (rc == 0 ? 1u : 0u))
		abort();
	wstore_strings_free(ids);
	/* READY or FAILED: the next input starts from an empty store */
	if (id)
		wstore_delete(s, id);
	free(id);
	close(fd);
	return 0;
}
