/*
 * cmd_df.c - wstore df: what the store holds, by checkpoint (size, pinned,
 * leased, last read), the total, and the store's capacity and free space
 * where the backend can tell.
 */
#include <stdio.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <wstore/lease.h>

#include "cli.h"

static const char help[] =
	"usage: wstore df [--json]\n"
	"\n"
	"Show every checkpoint of the index with its size, whether it is\n"
	"pinned, how many read leases it has and when it was last read;\n"
	"then the total, and the store's capacity and free space where the\n"
	"backend can tell (file store: its file system; Redis: maxmemory);\n"
	"on a file store whose files share blocks (identical files, XFS or\n"
	"btrfs), how many bytes are shared and how many that saves.\n";

static json_t *as_json(const wstore_usage *u)
{
	json_t *rows = json_array(), *j;
	uint64_t cap, fr;
	int known = wstore_usage_space(&cap, &fr, u) == 0;

	for (size_t i = 0; i < wstore_usage_count(u); i++) {
		wstore_usage_info in;

		wstore_usage_get(&in, u, i);
		json_array_append_new(
			rows, json_pack("{s:s, s:s, s:s, s:I, s:b, s:I, s:I}",
					"checkpoint_id", in.id, "model_id",
					in.model_id, "status", in.status,
					"size", (json_int_t)in.size, "pinned",
					in.pinned, "leases",
					(json_int_t)in.leases, "last_read_at",
					(json_int_t)(in.last_read_ms / 1000)));
	}
	j = json_pack("{s:o, s:I}", "checkpoints", rows, "total",
		      (json_int_t)wstore_usage_total(u));
	json_object_set_new(j, "capacity",
			    known && cap != UINT64_MAX
				    ? json_integer((json_int_t)cap)
				    : json_null());
	json_object_set_new(j, "free",
			    known && fr != UINT64_MAX
				    ? json_integer((json_int_t)fr)
				    : json_null());
	known = wstore_usage_shared(&cap, &fr, u) == 0;
	json_object_set_new(j, "shared",
			    known ? json_integer((json_int_t)cap)
				  : json_null());
	json_object_set_new(j, "saved",
			    known ? json_integer((json_int_t)fr) : json_null());
	return j;
}

static void print_table(const struct cli *c, const wstore_usage *u)
{
	static const char *const head[] = {
		"CHECKPOINT", "SIZE", "PINNED", "LEASES", "LAST READ", "STATUS"
	};
	struct cli_table tab;
	char sz[32];
	uint64_t cap, fr;

	cli_table_init(&tab, 6, "lrlrll", head);
	for (size_t i = 0; i < wstore_usage_count(u); i++) {
		wstore_usage_info in;
		char t[32], leases[16];
		const char *cell[6];

		wstore_usage_get(&in, u, i);
		wstore_format_size(sz, sizeof(sz), in.size);
		cli_time(t, sizeof(t), in.last_read_ms / 1000);
		snprintf(leases, sizeof(leases), "%u", in.leases);
		cell[0] = cli_text(c, in.id);
		cell[1] = sz;
		cell[2] = in.pinned ? "yes" : "no";
		cell[3] = leases;
		cell[4] = in.last_read_ms > 0 ? t : "never";
		cell[5] = in.status;
		cli_table_add(&tab, cell);
	}
	cli_table_print(&tab);
	wstore_format_size(sz, sizeof(sz), wstore_usage_total(u));
	printf("total: %zu checkpoints, %s\n", wstore_usage_count(u), sz);
	if (wstore_usage_space(&cap, &fr, u) == 0 && cap != UINT64_MAX) {
		char f[32];

		wstore_format_size(sz, sizeof(sz), cap);
		wstore_format_size(f, sizeof(f), fr);
		printf("store: %s free of %s\n", f, sz);
	} else {
		printf("store: capacity unknown\n");
	}
	/* identical files stored once (the file store on XFS, btrfs) */
	if (wstore_usage_shared(&cap, &fr, u) == 0 && cap > 0) {
		char f[32];

		wstore_format_size(sz, sizeof(sz), cap);
		wstore_format_size(f, sizeof(f), fr);
		printf("shared: %s of the files share their blocks, %s "
		       "stored once for several\n",
		       sz, f);
	}
}

int cmd_df(struct cli *c, int argc, char **argv)
{
	wstore_store *s = NULL;
	wstore_usage *u = NULL;
	int rc;

	if (cli_wants_help(argc, argv)) {
		cli_print_help(help);
		return EXIT_OK;
	}
	if (argc > 1)
		return wfront_usage_error("'df' takes no arguments");
	if (cli_open_store(c, &s, WSTORE_OPEN_READONLY))
		return EXIT_ERR;
	rc = wstore_usage_read(&u, s);
	cli_close_store(s);
	if (rc < 0)
		return cli_fail(rc);
	if (c->json)
		cli_print_json(as_json(u));
	else
		print_table(c, u);
	wstore_usage_free(u);
	return EXIT_OK;
}
