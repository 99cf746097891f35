/*
 * fuzz_config.c - libFuzzer target for the config file parser
 * (wstore__config_parse, the in-memory half of wstore_config_load).
 *
 * Every value that loads is read back for every known key.  Seeds in
 * tests/fuzz/corpus/config/.  Needs src/lib on the include path.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/helpers.h"
#include "config.h"
#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wstore_config *cfg = NULL, *copy = NULL;
	const char *const *keys = wstore_config_keys();

	if (wstore__config_parse(&cfg, (const char *)data, size, "fuzz") != 0)
		return 0;
	if (wstore_config_new(&copy) != 0 || wstore_config_merge(copy, cfg))
		abort();
	for (size_t i = 0; keys[i]; i++) {
		const char *a = wstore_config_get(cfg, keys[i]);
		const char *b = wstore_config_get(copy, keys[i]);

		if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
			abort();
	}
	wstore_config_free(copy);
	wstore_config_free(cfg);
	return 0;
}
