/*
 * table.c - every kind of backend a store URL can name, in the order
 * store.c tries their schemes.  Each kind (its schemes and constructor,
 * struct wstore__backend_kind in helpers.h) is defined next to its
 * backend's callbacks; a new backend adds one line here.
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

const wstore__backend_kind *const wstore__backend_kinds[] = {
	&wstore__kind_file,  &wstore__kind_mem,	     &wstore__kind_fault,
	&wstore__kind_redis, &wstore__kind_mooncake, NULL,
};
