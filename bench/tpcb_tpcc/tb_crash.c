/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tb_crash.c -- tpcbench's workloads and backends for crash testing
 *
 *   tb_crash WORKLOAD BACKEND[:DOMAIN] DIR create
 *   tb_crash WORKLOAD BACKEND[:DOMAIN] DIR run N [--stop-at K] [--acks FD]
 *   tb_crash WORKLOAD BACKEND[:DOMAIN] DIR check [--min M]
 *   options: --db-size BYTES (1 MiB)  --seed S
 *   BACKEND: vista, vista:redo, vista:v0 .. vista:v2, pmemobj, rvm,
 *   rvm-rio, and trinity and quadra (their own layout of debit-credit
 *   and order-entry; not with --stop-at)
 *
 * and, built as a module for pmemtest --check-lib,
 *   tb_pm_check_debit_credit(image, dir), tb_pm_check_order_entry(...)
 * (vista in the cacheline domain, 1 MiB, the default seed), and
 *   tb_pm_check_debit_credit_v0 .. _v2, tb_pm_check_order_entry_v0 .. _v2
 * (Vista's Versions 0-2, the same).
 *
 * The same code as the benchmark's -- the workload's transactions and the
 * backend's begin / set_ranges / commit -- on a database kept in DIR
 * (tb_opts.work_dir) from one process to the next:
 *   create  builds DIR, populates a database and makes it durable;
 *   run     reopens it (recovery), runs N transactions (0: until killed)
 *           and closes it; --stop-at K ends the process (_exit) in
 *           transaction K after its stores, before its commit, leaving
 *           recovery work; --acks FD writes the count of committed
 *           transactions (8 bytes, native order) to FD after each commit;
 *   check   reopens it (the backend's recovery) and checks the workload's
 *           invariants after a crash (check_recovered), and, with --min,
 *           that at least M transactions committed (every acknowledged
 *           one is durable) and at most M + 1; prints "committed N";
 *           exit status 0 if consistent, 1 if not, 2 on other failures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpcbench.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef TB_HAVE_VISTA
const struct tb_backend tb_backend_vista = { .name = NULL };
const struct tb_backend tb_backend_vista_redo = { .name = NULL };
const struct tb_backend tb_backend_vista_snap = { .name = NULL };
#endif

static const struct tb_workload *
workload_of(const char *name)
{
	const struct tb_workload *all[] = { &tb_debit_credit, &tb_order_entry,
		&tb_synthetic };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* "vista:byte" -> the backend and o->domain. */
static const struct tb_backend *
backend_of(const char *spec, struct tb_opts *o)
{
	const struct tb_backend *all[] = { &tb_backend_vista,
		&tb_backend_vista_redo, &tb_backend_vista_snap,
		&tb_backend_pmemobj, &tb_backend_rvm, &tb_backend_rvm_rio,
		&tb_backend_vista_v0, &tb_backend_vista_v1,
		&tb_backend_vista_v2, &tb_backend_trinity,
		&tb_backend_quadra };
	char name[32];
	if (tb_vista_version_spec(spec, name, sizeof(name)))
		return NULL;
	char *colon = strchr(name, ':');
	o->domain = TB_DOMAIN_CACHELINE;
	if (colon != NULL) {
		*colon = 0;
		const char *d = colon + 1;
		o->domain = !strcmp(d, "byte") ? TB_DOMAIN_BYTE :
			!strcmp(d, "page") ? TB_DOMAIN_PAGE :
			!strcmp(d, "cacheline") ? TB_DOMAIN_CACHELINE :
			TB_DOMAIN_NONE;
		if (o->domain == TB_DOMAIN_NONE)
			return NULL;
	}
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i]->name != NULL && !strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* The workload as the backend runs it: Trinity and Quadra bring their
 * own layout of it (backend_pword.c).  NULL, reported, if there is none. */
static const struct tb_workload *
layout_of(const struct tb_backend *b, const struct tb_workload *w)
{
	if (b->layout == NULL)
		return w;
	const struct tb_workload *own = b->layout(w->name);
	if (own == NULL)
		tb_err("%s has no layout of %s", b->name, w->name);
	return own;
}

static void
defaults(struct tb_opts *o, const char *workload, const char *dir)
{
	*o = (struct tb_opts){
		.workload = workload,
		.domain = TB_DOMAIN_CACHELINE,
		.group = 1,
		.threads = 1,
		.db_size = 1u << 20,
		.tx_size = 8,
		.runs = 1,
		.seed = 0x7470636265ull,
		.rvm_dir = dir,
		.rio_dir = dir,
		.pmem_dir = dir,
		.work_dir = dir,
		.quiet = true,
	};
}

/* One database, open. */
struct db {
	const struct tb_backend *b;
	const struct tb_workload *w;
	void *wl, *ctx, *area;
};

static int
db_open(const struct tb_opts *o, const struct tb_backend *b,
	const struct tb_workload *w, bool create, struct db *d)
{
	*d = (struct db){ .b = b, .w = w };
	if (w->init(o, o->db_size, o->seed, &d->wl))
		return -1;
	if (b->setup && b->setup(o))
		return -1;
	if (b->open(o, 0, create, &d->ctx, &d->area)) {
		d->ctx = NULL;
		return -1;
	}
	if (create) {
		w->populate(d->wl, d->area);
		if (b->loaded(d->ctx))
			return -1;
	}
	return 0;
}

/* Close without removing anything (the next process reopens DIR). */
static int
db_close(struct db *d)
{
	int rc = 0;
	if (d->ctx != NULL && d->b->close(d->ctx))
		rc = -1;
	d->ctx = NULL;
	if (d->b->teardown && d->b->teardown(false))
		rc = -1;
	if (d->wl != NULL)
		d->w->fini(d->wl);
	d->wl = NULL;
	return rc;
}

/* The crash-time invariants; prints why not.  1 inconsistent, 0 not. */
static int
db_check(struct db *d, uint64_t *committed)
{
	char why[512];
	if (d->w->check_recovered == NULL) {
		tb_err("%s has no invariants to check after a crash",
			d->w->name);
		return 1;
	}
	if (d->w->check_recovered(d->wl, d->area, committed, why,
		    sizeof(why))) {
		fprintf(stderr, "tb_crash: INVARIANT VIOLATED (%s, %s, after "
			"recovery): %s\n", d->w->name, d->b->name, why);
		return 1;
	}
	return 0;
}

static int
check_dir(const struct tb_opts *o, const struct tb_backend *b,
	const struct tb_workload *w, uint64_t *committed)
{
	struct db d;
	int rc = db_open(o, b, w, false, &d) ? 2 : db_check(&d, committed);
	if (db_close(&d) && rc == 0)
		rc = 2;
	return rc;
}

#ifdef TB_CRASH_MODULE

/* pmemtest --check-lib: the image directory holds the backend's pools. */
static int
pm_check(const char *workload, const char *spec, const char *dir)
{
	struct tb_opts o;
	uint64_t committed;
	defaults(&o, workload, dir);
	const struct tb_backend *b = backend_of(spec, &o);
	const struct tb_workload *w = workload_of(workload);
	if (b == NULL || w == NULL || (w = layout_of(b, w)) == NULL)
		return 2;
	return check_dir(&o, b, w, &committed);
}

EXPORT int tb_pm_check_debit_credit(const char *image, const char *dir);
EXPORT int tb_pm_check_order_entry(const char *image, const char *dir);

int
tb_pm_check_debit_credit(const char *image, const char *dir)
{
	(void)image;
	return pm_check("debit-credit", "vista:cacheline", dir);
}

int
tb_pm_check_order_entry(const char *image, const char *dir)
{
	(void)image;
	return pm_check("order-entry", "vista:cacheline", dir);
}

/* Vista's Versions 0-2 (vversions.c): tb_pm_check_debit_credit_v0 .. */
#define TB_PM_CHECK_VV(fn, workload, ver)                                  \
	EXPORT int fn(const char *image, const char *dir);                 \
	int fn(const char *image, const char *dir)                         \
	{                                                                  \
		(void)image;                                               \
		return pm_check(workload, "vista:" ver, dir);              \
	}
TB_PM_CHECK_VV(tb_pm_check_debit_credit_v0, "debit-credit", "v0")
TB_PM_CHECK_VV(tb_pm_check_debit_credit_v1, "debit-credit", "v1")
TB_PM_CHECK_VV(tb_pm_check_debit_credit_v2, "debit-credit", "v2")
TB_PM_CHECK_VV(tb_pm_check_order_entry_v0, "order-entry", "v0")
TB_PM_CHECK_VV(tb_pm_check_order_entry_v1, "order-entry", "v1")
TB_PM_CHECK_VV(tb_pm_check_order_entry_v2, "order-entry", "v2")

#else /* the program */

/* --stop-at: the backend with a commit that ends the process instead. */
static const struct tb_backend *real;
static uint64_t stop_at, begun;

static int
stop_begin(void *ctx)
{
	begun++;
	return real->begin(ctx);
}

static int
stop_commit(void *ctx)
{
	if (begun == stop_at)
		_exit(0); /* a process crash: stores made, commit not */
	return real->commit(ctx);
}

static int
run(const struct tb_opts *o, const struct tb_backend *b,
	const struct tb_workload *w, uint64_t n, int acks)
{
	static struct tb_backend stopper;
	if (stop_at) {
		real = b;
		stopper = *b;
		stopper.begin = stop_begin;
		stopper.commit = stop_commit;
		b = &stopper;
	}
	struct db d;
	int rc = db_open(o, b, w, false, &d) ? 2 : 0;
	uint64_t committed = 0;
	for (uint64_t i = 0; rc == 0 && (n == 0 || i < n); i++) {
		int t = w->tx(d.wl, d.area, b, d.ctx);
		if (t < 0) {
			rc = 2;
			break;
		}
		committed += t == 0;
		if (acks >= 0 && t == 0 && write(acks, &committed,
			    sizeof(committed)) != (ssize_t)sizeof(committed)) {
			tb_err("--acks: %s", strerror(errno));
			rc = 2;
		}
	}
	if (db_close(&d) && rc == 0)
		rc = 2;
	return rc;
}

static int
usage(void)
{
	fprintf(stderr, "usage: tb_crash WORKLOAD BACKEND[:DOMAIN] DIR "
		"create|run N|check [--stop-at K] [--acks FD] [--min M] "
		"[--db-size SIZE] [--seed S]\n");
	return 2;
}

int
main(int argc, char **argv)
{
	if (argc < 5)
		return usage();
	struct tb_opts o;
	defaults(&o, argv[1], argv[3]);
	const struct tb_workload *w = workload_of(argv[1]);
	const struct tb_backend *b = backend_of(argv[2], &o);
	const char *verb = argv[4];
	int i = 5;
	uint64_t n = 0, min = 0;
	bool has_min = false;
	int acks = -1;
	if (w == NULL || b == NULL)
		return usage();
	if ((w = layout_of(b, w)) == NULL)
		return 2;
	if (!strcmp(verb, "run")) {
		if (i >= argc)
			return usage();
		n = strtoull(argv[i++], NULL, 0);
	}
	for (; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (!strcmp(k, "--stop-at"))
			stop_at = strtoull(v, NULL, 0);
		else if (!strcmp(k, "--acks"))
			acks = atoi(v);
		else if (!strcmp(k, "--min"))
			min = strtoull(v, NULL, 0), has_min = true;
		else if (!strcmp(k, "--db-size"))
			o.db_size = strtoull(v, NULL, 0);
		else if (!strcmp(k, "--seed"))
			o.seed = strtoull(v, NULL, 0);
		else
			return usage();
	}
	if (i != argc)
		return usage();
	if (stop_at && b->layout != NULL) {
		/* Their transactions call the design's own begin and commit,
		 * not the backend's, which --stop-at replaces. */
		tb_err("--stop-at: %s runs its own transactions; kill it "
			"instead", b->name);
		return 2;
	}

	if (!strcmp(verb, "create")) {
		if (tb_mkdirs(o.work_dir))
			return 2;
		struct db d;
		int rc = db_open(&o, b, w, true, &d) ? 2 : 0;
		return db_close(&d) || rc ? 2 : 0;
	}
	if (!strcmp(verb, "run"))
		return run(&o, b, w, n, acks);
	if (!strcmp(verb, "check")) {
		uint64_t committed = 0;
		int rc = check_dir(&o, b, w, &committed);
		if (rc == 0)
			printf("committed %llu\n", (unsigned long long)committed);
		if (rc == 0 && has_min && (committed < min ||
		    committed > min + 1)) {
			fprintf(stderr, "tb_crash: DURABILITY VIOLATED (%s, %s): "
				"%llu transactions acknowledged, %llu committed "
				"after recovery\n", w->name, b->name,
				(unsigned long long)min,
				(unsigned long long)committed);
			rc = 1;
		}
		return rc;
	}
	return usage();
}

#endif /* TB_CRASH_MODULE */
