/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tpcbench_int.h -- result rows, the CSV they travel in, the report
 */
#ifndef TPCBENCH_INT_H
#define TPCBENCH_INT_H

#include <stdio.h>

#include "tpcbench.h"

/* One run of one configuration: a CSV row. */
struct tb_row {
	char workload[32], backend[32], label[96], domain[16], env[96];
	int group, threads, run;
	uint64_t db_bytes, tx_size;
	uint64_t tx, aborts;
	double seconds;
	bool has_fences, has_log, has_syncs;
	uint64_t fences, flushes, bytes_logged, syncs, log_writes, truncations;
	uint64_t rss, mem;
	double fence_ns;
	/* --replica: bytes sent to the backup in the run (modified data,
	 * undo/mirror, metadata, all on the wire), commit latency. */
	bool has_repl;
	uint64_t sent_data, sent_undo, sent_meta, sent_total;
	double lat_med_us, lat_p99_us;
};

extern const char tb_csv_header[];
void tb_row_write(FILE *f, const struct tb_row *r);
/* Parse one CSV line; 0 or -1 (a header or malformed line). */
int tb_row_parse(const char *line, struct tb_row *r);

/* run.c: one configuration in this process; 0, or 2 on any failure. */
int tb_run_config(const struct tb_opts *o, const struct tb_backend *b,
	const struct tb_workload *w, const struct tb_row *proto, FILE *rows);

/* report.c: the tables for every workload in rows[0..n). */
void tb_report(FILE *out, const struct tb_row *rows, size_t n,
	struct tb_persist_cost cost);

/* One line per configuration (middle-runs average), for the plots. */
void tb_summary(FILE *out, const struct tb_row *rows, size_t n);

#endif /* TPCBENCH_INT_H */
