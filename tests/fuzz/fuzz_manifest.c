/*
 * fuzz_manifest.c - libFuzzer target for the manifest parser.
 *
 * Parses the input; when it parses, serialises it, parses that again and
 * checks that serialising is a fixed point (same bytes twice).  Seeds in
 * tests/fuzz/corpus/manifest/.  Build with clang -fsanitize=fuzzer,address
 * against the library sources.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wstore/wstore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wstore_manifest *m = NULL, *m2 = NULL;
	char *s1 = NULL, *s2 = NULL;
	size_t n1 = 0, n2 = 0;

	if (wstore_manifest_parse(&m, data, size) != 0)
		return 0;
	for (size_t i = 0; i < wstore_manifest_file_count(m); i++) {
		wstore_file_info fi;

		if (wstore_manifest_file(&fi, m, i) != 0 ||
		    wstore_manifest_find(m, fi.path) != (int64_t)i)
			abort();
		for (uint64_t j = 0; j < fi.chunk_count; j++)
			if (!wstore_manifest_chunk_key(m, i, j))
				abort();
	}
	if (wstore_manifest_serialize(&s1, &n1, m) != 0)
		abort();
	if (wstore_manifest_parse(&m2, s1, n1) != 0)
		abort();
	if (wstore_manifest_serialize(&s2, &n2, m2) != 0 || n1 != n2 ||
	    memcmp(s1, s2, n1) != 0)
		abort();
	free(s1);
	free(s2);
	wstore_manifest_free(m);
	wstore_manifest_free(m2);
	return 0;
}
