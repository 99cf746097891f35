/*
 * table.c - every kind of backend a store URL can name, in the order
 * store.c tries their schemes.  Each kind (its schemes and constructor,
 * struct wstore__backend_kind in helpers.h) is defined next to its
 * backend's callbacks; a new backend adds one line here.
 *
 * This file is built twice (meson.build): with WSTORE_TEST_BACKENDS into
 * the library the tests run (the build tree's libwstore.so and the unit
 * tests), which adds the in-memory store ("mem://") and the fault
 * injector ("fault+URL"); without it into the library that is installed,
 * where neither exists: a process that links the installed library can
 * never be made to crash or lose data by a store URL.
 */
#include <stddef.h>

#include "helpers.h"

#ifndef WSTORE_HAVE_REDIS
/* Not built in: its URLs get an error naming the build option. */
const wstore__backend_kind wstore__kind_redis = {
	.name = "Redis",
	.schemes = { "redis://*", "rediss://*", "redis+unix://*",
		     "redis-cluster://*", "rediss-cluster://*" },
	.usage = "redis://, rediss://, redis+unix://, redis-cluster://, "
		 "rediss-cluster://",
	.build_option = "-Dredis=enabled",
};
#endif

#ifdef WSTORE_TEST_BACKENDS
const wstore__backend_kind *const wstore__backend_kinds[] = {
	&wstore__kind_file,  &wstore__kind_mem,	     &wstore__kind_fault,
	&wstore__kind_redis, &wstore__kind_mooncake, NULL,
};
#else
const wstore__backend_kind *const wstore__backend_kinds[] = {
	&wstore__kind_file,
	&wstore__kind_redis,
	&wstore__kind_mooncake,
	NULL,
};

/* In the ABI since WSTORE_0; the memory store itself is in test builds
 * only. */
int wstore_backend_mem_new(wstore_backend **out, unsigned flags)
{
	(void)flags;
	*out = NULL;
	return wstore_backend_error(WSTORE_EUNSUPPORTED,
				    "the memory store is not in this build of "
				    "libwstore (test builds only)");
}
#endif
