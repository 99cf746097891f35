/*
 * fuzz_safetensors.c - libFuzzer target for the weight-format parsers:
 * the safetensors header parser (wstore__safetensors_parse) and the GGUF
 * header walk (wstore__gguf_parse_mem), both on the input as a whole file.
 *
 * When a safetensors header parses, the table's invariants are checked:
 * tensors tile the data in offset order, each span matches its shape and
 * dtype, every name is found by the name index.  Seeds:
 * the .safetensors files of tests/data/safetensors/good and bad.  Needs src/lib
 * on the include path; build with clang -fsanitize=fuzzer,address against the
 * library sources.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "error.h"
#include "manifest.h"
#include "names.h"
#include "gguf.h"
#include "readv.h"
#include "safetensors.h"
#include "store.h"

static void check_table(const wstore__st *st, size_t size)
{
	uint64_t pos = 0;

	if (st->data_start != st->header_len + 8)
		abort();
	for (size_t i = 0; i < st->n; i++) {
		const wstore__st_tensor *t = &st->t[i];
		unsigned bits = wstore__st_dtype_bits(t->dtype);
		unsigned __int128 n = 1;

		for (uint32_t d = 0; d < t->ndim; d++)
			n *= (uint64_t)t->shape[d];
		if (t->begin != pos || !bits || n != t->nelem ||
		    n * bits != (unsigned __int128)(t->end - t->begin) * 8)
			abort();
		if (wstore__st_find(st, t->name) < 0)
			abort();
		pos = t->end;
	}
	if (st->data_start + pos != size)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wstore__gguf_info gi;
	wstore__st *st = NULL;

	if (wstore__safetensors_parse(&st, data, size, size, "fuzz") == 0) {
		check_table(st, size);
		wstore__st_free(st);
	}
	if (wstore__gguf_parse_mem(&gi, data, size, "fuzz") == 0 &&
	    gi.data_start > size && gi.tensor_count)
		abort();
	return 0;
}
