/*
 * fuzz_hublist.c - libFuzzer target for what an upstream Hub sends the
 * Hub client (docs/trust.md): a Link header's value (wstore__link_next)
 * and a page of a tree listing (wstore__hub_add_page, then the checks of
 * a whole listing: wstore__hub_names_fit).
 *
 * The input is split at its first NUL: the part before is the Link
 * header's value, the rest a listing page.  Checked: a next URL found is
 * NUL-terminated and shorter than the buffer; its origin check
 * (wstore__same_origin) never crashes; every file a page keeps has a
 * path an import may record, 40-hex oid, a size and a running total
 * within the limits (small ones here, so that they are reached), and
 * never more files than the limit; an error leaves one line.  Seeds in
 * tests/fuzz/corpus/hublist/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hub.h"
#include "hubtrust.h"
#include "names.h"
#include "util.h"

#define MAX_FILES 50
#define MAX_FILE_SIZE ((uint64_t)1 << 20)
#define MAX_TOTAL ((uint64_t)4 << 20)

static void check_link(const char *v, size_t n, const wstore__endpoint *ep)
{
	char next[128];
	int rc = wstore__link_next(next, sizeof(next), v, n);

	if (rc == 1) {
		if (strlen(next) >= sizeof(next))
			abort();
		(void)wstore__same_origin(ep, next);
	} else if (rc != 0 && rc != -1) {
		abort();
	}
}

static void check_files(const wstore__hub *h)
{
	uint64_t total = 0;

	if (h->n > MAX_FILES)
		abort();
	for (size_t i = 0; i < h->n; i++) {
		const wstore__hub_file *f = &h->files[i];

		if (wstore__path_importable(f->path) != 0 ||
		    !wstore__is_hex(f->oid, 40) || f->size > MAX_FILE_SIZE ||
		    (f->sha256[0] && !wstore__is_hex(f->sha256, 64)))
			abort();
		total += f->size;
	}
	if (total > MAX_TOTAL || total != h->total)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	size_t vn = nul ? (size_t)(nul - (const char *)data) : size;
	const char *body = nul ? nul + 1 : "";
	size_t blen = nul ? size - vn - 1 : 0;
	wstore__hub h;
	size_t cap = 0;
	int rc;

	memset(&h, 0, sizeof(h));
	h.o.max_files = MAX_FILES;
	h.o.max_file_size = MAX_FILE_SIZE;
	h.o.max_total_size = MAX_TOTAL;
	wstore__hub_limits_of(&h.lim, &h.o);
	if (wstore__endpoint_parse(&h.ep, "http://127.0.0.1:8080/hub") != 0)
		abort();
	check_link((const char *)data, vn, &h.ep);
	rc = wstore__hub_add_page(&h, body, blen, "http://127.0.0.1:8080/x",
				  &cap);
	check_files(&h);
	if (rc == 0 && h.n) {
		qsort(h.files, h.n, sizeof(*h.files), wstore__hub_cmp_file);
		rc = wstore__hub_names_fit(&h);
	}
	if (rc < 0 && strchr(wstore_last_error(), '\n'))
		abort();
	for (size_t i = 0; i < h.n; i++)
		free(h.files[i].path);
	free(h.files);
	wstore__endpoint_free(&h.ep);
	wstore__clear_err();
	return 0;
}
