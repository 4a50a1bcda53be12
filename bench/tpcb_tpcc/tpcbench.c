/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tpcbench.c -- debit-credit, order-entry and synthetic transactions over
 * none, vista, pmemobj, rvm and rvm-rio (thesis section 3.5)
 *
 *   tpcbench --workload debit-credit|order-entry|synthetic
 *            --backend LIST [--domain byte|cacheline|page] [--db-size 50M]
 *            [--threads N] [--group 1,8,64] [--tx-size 8,64,...|sweep]
 *            [--seconds T | --tx N] [--runs 5] [--csv FILE] ...
 *
 * Design:
 *  1. The command line names a set of configurations: every backend of
 *     the list (vista, pmemobj and rvm-rio take a domain, "vista:byte", or
 *     --domain; rvm and rvm-rio each group size of --group; synthetic
 *     each --tx-size).  Each configuration runs in a fresh process -- this
 *     program again, with --child -- so RSS is per configuration and
 *     PMDK's environment is in place before libpmem initializes.
 *  2. The parent measures the fence latency, collects the children's CSV
 *     rows, appends them to --csv, and prints the tables (report.c).
 *  3. Exit status: 0 when every configuration ran and every invariant
 *     held; 2 otherwise (after running the rest and saying which failed).
 *  4. --replica LIST --peer HOST (vista only): after each vista
 *     configuration standalone, the same configuration with each mode of
 *     the list (replica.c), and first the round trip over HOST, so the
 *     report puts every mode beside standalone and the round trip of the
 *     same run.  Bad modes and peers are refused before anything runs.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpcbench_int.h"
#include "tb_replica.h"

#ifndef TB_HAVE_VISTA
/* libvista is not part of this build: the backend is absent, and says so. */
const struct tb_backend tb_backend_vista = { .name = NULL };
const struct tb_backend tb_backend_vista_redo = { .name = NULL };
const struct tb_backend tb_backend_vista_snap = { .name = NULL };
#endif

static const char *const all_backends =
	"none,vista:byte,vista:cacheline,vista:page,pmemobj:byte,"
	"pmemobj:cacheline,pmemobj:page,rvm,rvm-rio:byte,rvm-rio:cacheline,"
	"rvm-rio:page";
static const char *const sweep_sizes =
	"8,64,512,4096,32768,262144,1048576";

static void
usage(FILE *f)
{
	fprintf(f,
"usage: tpcbench --workload debit-credit|order-entry|synthetic\n"
"                --backend LIST [options]\n"
"  LIST: comma-separated of none, vista[:DOMAIN], pmemobj[:DOMAIN], rvm,\n"
"        rvm-rio[:DOMAIN], vista:v0|v1|v2|v3[:DOMAIN] (Vista's Versions\n"
"        0-2, Amza et al. section 4; v3 is vista), vista:redo[:DOMAIN]\n"
"        (libvista's redo mode: a DRAM copy, one fence a commit),\n"
"        vista:snap[:DOMAIN] (vista logging the before-images of the\n"
"        rows a transaction inserts too, as before new ranges),\n"
"        trinity[:DOMAIN],\n"
"        quadra[:DOMAIN] (per-word designs with their own layout;\n"
"        debit-credit and order-entry), undo-floor[:DOMAIN] (an undo\n"
"        log's two fences and nothing else: a bound, not recoverable);\n"
"        or \"all\" (%s)\n"
"  --domain byte|cacheline|page  domain of vista/pmemobj/rvm-rio without one\n"
"                       (cacheline)\n"
"  --db-size SIZE       database per stream (50M; K, M, G suffixes)\n"
"  --threads N          independent streams, each on its own database (1)\n"
"  --group LIST         rvm transactions per log flush, e.g. 1,8,64 (1);\n"
"                       vista: per vista_flush, VISTA_TX_NO_FLUSH between\n"
"  --tx-size LIST       synthetic bytes per transaction, or \"sweep\" (8)\n"
"  --seconds T          per run (1)      --tx N   transactions per run\n"
"  --runs R             runs per configuration (5; best and worst dropped)\n"
"  --rounds K           run every configuration K times in turn, R runs\n"
"                       each, aggregated together (1; R x K <= 64)\n"
"  --csv FILE           append the result rows (one per run) to FILE\n"
"  --summary FILE       write one line per configuration to FILE\n"
"  --rvm-dir DIR        rvm files, on a disk (/var/tmp)\n"
"  --rio-dir DIR        rvm-rio files, behind the Rio file cache (/var/tmp)\n"
"  --pmem-dir DIR       vista and pmemobj pools, rvm-rio's cache pool (/dev/shm)\n"
"  --per-range          one set_range call per range (the thesis' way;\n"
"                       default: all of a transaction's ranges in one call)\n"
"  --replica LIST       vista (V3) only: also run each configuration with\n"
"                       its streams replicated to a backup process, one\n"
"                       run per mode of %s\n"
"  --peer HOST          with --replica: the address (of this host) where\n"
"                       the primary listens and its backup connects\n"
"  --seed N  --quiet  --no-reopen\n", all_backends, tb_repl_modes);
}

static int
parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1048576; end++; break;
	case 'g': case 'G': v *= 1073741824; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

static enum tb_domain
parse_domain(const char *s)
{
	if (!strcmp(s, "byte"))
		return TB_DOMAIN_BYTE;
	if (!strcmp(s, "cacheline"))
		return TB_DOMAIN_CACHELINE;
	if (!strcmp(s, "page"))
		return TB_DOMAIN_PAGE;
	return TB_DOMAIN_NONE;
}

static const struct tb_workload *
workload_of(const char *name)
{
	const struct tb_workload *all[] = { &tb_debit_credit, &tb_order_entry,
		&tb_synthetic };
	for (size_t i = 0; i < 3; i++)
		if (name && !strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

static const struct tb_backend *
backend_of(const char *name)
{
	const struct tb_backend *all[] = { &tb_backend_none, &tb_backend_vista,
		&tb_backend_vista_redo, &tb_backend_vista_snap,
		&tb_backend_pmemobj, &tb_backend_rvm, &tb_backend_rvm_rio,
		&tb_backend_vista_v0, &tb_backend_vista_v1,
		&tb_backend_vista_v2, &tb_backend_trinity, &tb_backend_quadra,
		&tb_backend_undo_floor };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i]->name && !strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* Backends on a rio pool (or PMDK's), whose persistence domain is chosen. */
static bool
has_domain(const char *backend)
{
	return !strcmp(backend, "vista") || !strcmp(backend, "vista-redo") ||
		!strcmp(backend, "vista-snap") ||
		!strcmp(backend, "pmemobj") ||
		!strcmp(backend, "rvm-rio") || !strncmp(backend, "vista-v", 7) ||
		!strcmp(backend, "trinity") || !strcmp(backend, "quadra") ||
		!strcmp(backend, "undo-floor");
}

static bool
has_group(const char *backend)
{
	return !strncmp(backend, "rvm", 3) || !strcmp(backend, "vista");
}

/* PMDK's environment for a domain (backend_pmemobj.c). */
static void
pmdk_env(enum tb_domain d, char *buf, size_t n)
{
	if (d == TB_DOMAIN_BYTE)
		snprintf(buf, n, "PMEM_IS_PMEM_FORCE=1 PMEM_NO_FLUSH=1");
	else if (d == TB_DOMAIN_CACHELINE)
		snprintf(buf, n, "PMEM_IS_PMEM_FORCE=1");
	else
		snprintf(buf, n, "PMEM_IS_PMEM_FORCE=0");
}

static bool per_range_labels;

static void
label(char *buf, size_t n, const char *backend, enum tb_domain d, int group,
	const char *replica)
{
	int k = snprintf(buf, n, "%s", backend);
	if (replica)
		k += snprintf(buf + k, n - (size_t)k, "+%s", replica);
	if (has_domain(backend))
		k += snprintf(buf + k, n - (size_t)k, " (%s)", tb_domain_name(d));
	if (has_group(backend) && group > 1)
		k += snprintf(buf + k, n - (size_t)k, " group %d", group);
	if (per_range_labels)
		snprintf(buf + k, n - (size_t)k, " per-range");
}

/* ---- child: one configuration ---- */

static int
child(const struct tb_opts *o, const char *rowfile)
{
	const struct tb_workload *w = workload_of(o->workload);
	const struct tb_backend *b = backend_of(o->backend);
	if (w == NULL || b == NULL) {
		tb_err("unknown workload or backend");
		return 2;
	}
	if (b->layout != NULL && (w = b->layout(w->name)) == NULL) {
		tb_err("%s has no layout of %s (only debit-credit and "
			"order-entry)", b->name, o->workload);
		return 2;
	}
	struct tb_row proto = { 0 };
	snprintf(proto.workload, sizeof(proto.workload), "%s", w->name);
	snprintf(proto.backend, sizeof(proto.backend), "%s", b->name);
	label(proto.label, sizeof(proto.label), b->name, o->domain, o->group,
		o->replica);
	if (o->replica)
		snprintf(proto.backend, sizeof(proto.backend), "%s+%s", b->name,
			o->replica);
	snprintf(proto.domain, sizeof(proto.domain), "%s",
		has_domain(b->name) ? tb_domain_name(o->domain) : "-");
	proto.group = has_group(b->name) ? o->group : 0;
	proto.threads = o->threads;
	proto.db_bytes = o->db_size;
	proto.tx_size = w == &tb_synthetic ? o->tx_size : 0;
	if (b == &tb_backend_pmemobj) {
		char want[96];
		pmdk_env(o->domain, want, sizeof(want));
		const char *f = getenv("PMEM_IS_PMEM_FORCE");
		const char *nf = getenv("PMEM_NO_FLUSH");
		char have[96];
		snprintf(have, sizeof(have), "PMEM_IS_PMEM_FORCE=%s%s%s",
			f ? f : "", nf ? " PMEM_NO_FLUSH=" : "", nf ? nf : "");
		if (strcmp(want, have)) {
			tb_err("pmemobj %s needs %s in the environment (have %s)",
				tb_domain_name(o->domain), want, have);
			return 2;
		}
		snprintf(proto.env, sizeof(proto.env), "%s", have);
	}
	FILE *rows = fopen(rowfile, "a");
	if (rows == NULL) {
		tb_err("%s: %s", rowfile, strerror(errno));
		return 2;
	}
	int rc = tb_run_config(o, b, w, &proto, rows);
	fclose(rows);
	return rc;
}

/* ---- parent: every configuration, then the report ---- */

struct config {
	char backend[32];
	char replica[24];   /* "" standalone */
	enum tb_domain domain;
	int group;
	size_t tx_size;
};

static int
expand(const struct tb_opts *o, const char *backends, const char *groups,
	const char *sizes, const char *replicas, struct config *out, int max)
{
	int n = 0;
	char bl[512], gl[128], sl[256];
	snprintf(bl, sizeof(bl), "%s", !strcmp(backends, "all") ? all_backends :
		backends);
	bool syn = !strcmp(o->workload, "synthetic");
	for (char *bs = strtok(bl, ","); bs; bs = strtok(NULL, ",")) {
		char name[32];
		if (tb_vista_version_spec(bs, name, sizeof(name)))
			return -1;
		enum tb_domain d = o->domain;
		char *colon = strchr(name, ':');
		if (colon) {
			*colon = 0;
			d = parse_domain(colon + 1);
			if (d == TB_DOMAIN_NONE || !has_domain(name)) {
				tb_err("backend %s: bad domain", bs);
				return -1;
			}
		}
		if (!strcmp(name, "vista") && tb_backend_vista.name == NULL) {
			fprintf(stderr, "tpcbench: vista: not run -- libvista is "
				"not part of this build\n");
			continue;
		}
		if (backend_of(name) == NULL) {
			tb_err("unknown backend %s", name);
			return -1;
		}
		snprintf(gl, sizeof(gl), "%s", has_group(name) ? groups : "1");
		char *gsave, *ssave;
		for (char *g = strtok_r(gl, ",", &gsave); g;
		     g = strtok_r(NULL, ",", &gsave)) {
			snprintf(sl, sizeof(sl), "%s", syn ? sizes : "0");
			for (char *s = strtok_r(sl, ",", &ssave); s;
			     s = strtok_r(NULL, ",", &ssave)) {
				if (n == max) {
					tb_err("too many configurations");
					return -1;
				}
				struct config *c = &out[n++];
				snprintf(c->backend, sizeof(c->backend), "%s", name);
				c->domain = has_domain(name) ? d : TB_DOMAIN_NONE;
				c->group = atoi(g);
				if (c->group < 1) {
					tb_err("bad group %s", g);
					return -1;
				}
				if (parse_size(s, &c->tx_size)) {
					tb_err("bad transaction size %s", s);
					return -1;
				}
				/* Each replica mode after standalone. */
				if (replicas == NULL)
					continue;
				if (strcmp(name, "vista")) {
					tb_err("--replica: backend %s: only vista (V3) "
						"is replicated", bs);
					return -1;
				}
				char rl[128], *rsave;
				snprintf(rl, sizeof(rl), "%s", replicas);
				for (char *m = strtok_r(rl, ",", &rsave); m;
				     m = strtok_r(NULL, ",", &rsave)) {
					if (n == max) {
						tb_err("too many configurations");
						return -1;
					}
					enum tb_repl_kind kind;
					int vm;
					if (!tb_repl_parse(m, &kind, &vm) &&
					    kind == TB_REPL_PASSIVE &&
					    c->domain == TB_DOMAIN_BYTE) {
						tb_err("--replica %s: not in the byte "
							"domain (nothing is written back "
							"there for the passive backup to "
							"see)", m);
						return -1;
					}
					out[n] = *c;
					snprintf(out[n].replica, sizeof(out[n].replica),
						"%s", m);
					n++;
				}
			}
		}
	}
	return n;
}

static int
spawn(char **argv0, const struct tb_opts *o, const struct config *c,
	const char *rowfile)
{
	char dom[16], grp[16], txs[32], db[32], thr[16], sec[32], ntx[32],
	     runs[16], seed[32];
	snprintf(dom, sizeof(dom), "%s", tb_domain_name(c->domain == TB_DOMAIN_NONE ?
		TB_DOMAIN_CACHELINE : c->domain));
	snprintf(grp, sizeof(grp), "%d", c->group);
	snprintf(txs, sizeof(txs), "%zu", c->tx_size ? c->tx_size : 8);
	snprintf(db, sizeof(db), "%zu", o->db_size);
	snprintf(thr, sizeof(thr), "%d", o->threads);
	snprintf(sec, sizeof(sec), "%g", o->seconds);
	snprintf(ntx, sizeof(ntx), "%llu", (unsigned long long)o->ntx);
	snprintf(runs, sizeof(runs), "%d", o->runs);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->seed);
	char *args[40] = { argv0[0], "--child", (char *)rowfile,
		"--workload", (char *)o->workload, "--backend", (char *)c->backend,
		"--domain", dom, "--group", grp, "--tx-size", txs, "--db-size", db,
		"--threads", thr, "--seconds", sec, "--tx", ntx, "--runs", runs,
		"--seed", seed, "--rvm-dir", (char *)o->rvm_dir,
		"--rio-dir", (char *)o->rio_dir, "--pmem-dir", (char *)o->pmem_dir };
	int na = 31;
	if (o->quiet)
		args[na++] = "--quiet";
	if (o->no_reopen)
		args[na++] = "--no-reopen";
	if (o->per_range)
		args[na++] = "--per-range";
	if (c->replica[0]) {
		args[na++] = "--replica";
		args[na++] = (char *)c->replica;
		args[na++] = "--peer";
		args[na++] = (char *)o->peer;
	}
	args[na] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		tb_err("fork: %s", strerror(errno));
		return 2;
	}
	if (pid == 0) {
		unsetenv("PMEM_IS_PMEM_FORCE");
		unsetenv("PMEM_NO_FLUSH");
		if (!strcmp(c->backend, "pmemobj")) {
			setenv("PMEM_IS_PMEM_FORCE",
				c->domain == TB_DOMAIN_PAGE ? "0" : "1", 1);
			if (c->domain == TB_DOMAIN_BYTE)
				setenv("PMEM_NO_FLUSH", "1", 1);
		}
		execv("/proc/self/exe", args);
		tb_err("exec: %s", strerror(errno));
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* A child that failed may have left its files behind. */
	const char *dirs[] = { o->rvm_dir, o->rio_dir, o->pmem_dir };
	for (int i = 0; i < 3; i++) {
		char d[4200];
		snprintf(d, sizeof(d), "%s/tpcbench.%d", dirs[i], (int)pid);
		tb_rmtree(d);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	tb_err("%s: killed by signal %d", c->backend, WTERMSIG(st));
	return 2;
}

int
main(int argc, char **argv)
{
	struct tb_opts o = {
		.domain = TB_DOMAIN_CACHELINE,
		.group = 1,
		.threads = 1,
		.db_size = 50u << 20,
		.tx_size = 8,
		.seconds = 1,
		.runs = 5,
		.seed = 0x7470636265ull,
		.rvm_dir = "/var/tmp",
		.rio_dir = "/var/tmp",
		.pmem_dir = "/dev/shm",
	};
	const char *backends = NULL, *groups = "1", *sizes = "8";
	const char *rowfile = NULL, *summary = NULL, *replicas = NULL;
	int rounds = 1;
	enum { O_SUMMARY = 255, O_CHILD = 256, O_RVM, O_RIO, O_PMEM, O_SEED,
		O_NOREOPEN, O_PERRANGE, O_REPLICA, O_PEER, O_ROUNDS };
	static const struct option lo[] = {
		{ "workload", required_argument, 0, 'w' },
		{ "backend", required_argument, 0, 'b' },
		{ "domain", required_argument, 0, 'd' },
		{ "db-size", required_argument, 0, 's' },
		{ "threads", required_argument, 0, 't' },
		{ "group", required_argument, 0, 'g' },
		{ "tx-size", required_argument, 0, 'x' },
		{ "seconds", required_argument, 0, 'T' },
		{ "tx", required_argument, 0, 'n' },
		{ "runs", required_argument, 0, 'r' },
		{ "csv", required_argument, 0, 'c' },
		{ "summary", required_argument, 0, O_SUMMARY },
		{ "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' },
		{ "child", required_argument, 0, O_CHILD },
		{ "rvm-dir", required_argument, 0, O_RVM },
		{ "rio-dir", required_argument, 0, O_RIO },
		{ "pmem-dir", required_argument, 0, O_PMEM },
		{ "seed", required_argument, 0, O_SEED },
		{ "no-reopen", no_argument, 0, O_NOREOPEN },
		{ "per-range", no_argument, 0, O_PERRANGE },
		{ "replica", required_argument, 0, O_REPLICA },
		{ "peer", required_argument, 0, O_PEER },
		{ "rounds", required_argument, 0, O_ROUNDS },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "w:b:d:s:t:g:x:T:n:r:c:qh", lo,
			NULL)) != -1) {
		switch (c) {
		case 'w': o.workload = optarg; break;
		case 'b': backends = optarg; break;
		case 'd':
			o.domain = parse_domain(optarg);
			if (o.domain == TB_DOMAIN_NONE) {
				tb_err("--domain byte|cacheline|page");
				return 2;
			}
			break;
		case 's':
			if (parse_size(optarg, &o.db_size) || o.db_size < (1u << 20)) {
				tb_err("--db-size: at least 1M");
				return 2;
			}
			break;
		case 't': o.threads = atoi(optarg); break;
		case 'g': groups = optarg; o.group = atoi(optarg); break;
		case 'x':
			sizes = strcmp(optarg, "sweep") ? optarg : sweep_sizes;
			parse_size(sizes, &o.tx_size);
			break;
		case 'T': o.seconds = atof(optarg); break;
		case 'n': o.ntx = strtoull(optarg, NULL, 0); break;
		case 'r': o.runs = atoi(optarg); break;
		case 'c': o.csv = optarg; break;
		case O_SUMMARY: summary = optarg; break;
		case 'q': o.quiet = true; break;
		case 'h': usage(stdout); return 0;
		case O_CHILD: rowfile = optarg; break;
		case O_RVM: o.rvm_dir = optarg; break;
		case O_RIO: o.rio_dir = optarg; break;
		case O_PMEM: o.pmem_dir = optarg; break;
		case O_SEED: o.seed = strtoull(optarg, NULL, 0); break;
		case O_NOREOPEN: o.no_reopen = true; break;
		case O_PERRANGE: o.per_range = per_range_labels = true; break;
		case O_REPLICA: replicas = optarg; break;
		case O_PEER: o.peer = optarg; break;
		case O_ROUNDS: rounds = atoi(optarg); break;
		default: usage(stderr); return 2;
		}
	}
	if (!workload_of(o.workload) || backends == NULL || o.threads < 1 ||
	    o.threads > TB_MAX_STREAMS || o.runs < 1 || o.runs > 64 ||
	    rounds < 1 || o.runs * rounds > 64 ||
	    (o.seconds <= 0 && o.ntx == 0) || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (replicas != NULL || o.peer != NULL) {
		/* Refused before anything runs: a mode we do not know, a
		 * missing or unusable peer, a mode with no-flush groups. */
		char rl[128];
		enum tb_repl_kind kind;
		int vm;
		if (replicas == NULL) {
			tb_err("--peer needs --replica MODE");
			return 2;
		}
		if (o.peer == NULL) {
			tb_err("--replica needs --peer HOST (e.g. 127.0.0.1)");
			return 2;
		}
		snprintf(rl, sizeof(rl), "%s", replicas);
		if (strlen(replicas) >= sizeof(rl) || rl[0] == 0) {
			tb_err("--replica %s: a list of %s", replicas,
				tb_repl_modes);
			return 2;
		}
		for (char *m = strtok(rl, ","); m; m = strtok(NULL, ","))
			if (tb_repl_parse(m, &kind, &vm)) {
				tb_err("--replica: unknown mode \"%s\" (modes: "
					"%s)", m, tb_repl_modes);
				return 2;
			}
		if (o.group > 1 || strchr(groups, ',')) {
			tb_err("--replica: not with --group (no-flush groups "
				"are not replicated)");
			return 2;
		}
		if (tb_peer_check(o.peer))
			return 2;
	}
	if (rowfile) {
		o.backend = backends;
		if (replicas) {
			/* A child runs one mode. */
			enum tb_repl_kind kind;
			int vm;
			if (strchr(replicas, ',') ||
			    tb_repl_parse(replicas, &kind, &vm)) {
				tb_err("--child: one replica mode");
				return 2;
			}
			o.replica = replicas;
		}
		return child(&o, rowfile);
	}

	static struct config cfg[256];
	int n = expand(&o, backends, groups, sizes, replicas, cfg, 256);
	if (n <= 0)
		return 2;
	double rtt_med = 0, rtt_p99 = 0;
	if (replicas && tb_rtt(o.peer, 5000, &rtt_med, &rtt_p99))
		return 2;
	char rowfile_buf[4096];
	snprintf(rowfile_buf, sizeof(rowfile_buf), "%s/tpcbench-rows.%d",
		o.pmem_dir, (int)getpid());
	unlink(rowfile_buf);
	struct tb_persist_cost cost = tb_persist_cost(o.pmem_dir);
	int failures = 0;
	/* --rounds: every configuration once a round, so that a load spike
	 * of a shared machine hits them alike; a configuration's runs of all
	 * rounds are aggregated together. */
	for (int k = 0; k < rounds; k++)
		for (int i = 0; i < n; i++) {
			char l[128];
			label(l, sizeof(l), cfg[i].backend, cfg[i].domain,
				cfg[i].group, cfg[i].replica[0] ? cfg[i].replica :
				NULL);
			if (spawn(argv, &o, &cfg[i], rowfile_buf)) {
				fprintf(stderr, "tpcbench: FAILED: %s on %s\n",
					o.workload, l);
				failures++;
			}
		}
	/* Collect the rows, stamp the fence latency, keep them. */
	static struct tb_row rows[4096];
	size_t nr = 0;
	FILE *f = fopen(rowfile_buf, "r");
	FILE *csv = NULL;
	if (o.csv) {
		csv = fopen(o.csv, "a");
		if (csv == NULL) {
			tb_err("%s: %s", o.csv, strerror(errno));
			failures++;
		} else if (ftell(csv) == 0) {
			fprintf(csv, "%s\n", tb_csv_header);
		}
	}
	char line[1024];
	while (f && fgets(line, sizeof(line), f) && nr < 4096)
		if (tb_row_parse(line, &rows[nr]) == 0) {
			rows[nr].fence_ns = cost.fence_ns;
			if (csv)
				tb_row_write(csv, &rows[nr]);
			nr++;
		}
	if (f)
		fclose(f);
	if (csv)
		fclose(csv);
	unlink(rowfile_buf);
	tb_report(stdout, rows, nr, cost);
	if (replicas)
		printf("round trip over %s (64-byte TCP ping-pong between two "
			"processes, this run): median %.1f us, p99 %.1f us\n",
			o.peer, rtt_med, rtt_p99);
	if (summary) {
		FILE *sf = fopen(summary, "w");
		if (sf == NULL) {
			tb_err("%s: %s", summary, strerror(errno));
			failures++;
		} else {
			tb_summary(sf, rows, nr);
			fclose(sf);
		}
	}
	if (failures) {
		fprintf(stderr, "tpcbench: %d configuration(s) FAILED\n", failures);
		return 2;
	}
	return 0;
}
