// SPDX-License-Identifier: BSD-3-Clause
// unit_test.cpp -- dc-equiv (Definition 2), the linked example recovering
//                  after SIGKILL, refusals, and checkpoint-directory errors
#include <sys/xattr.h>

#include "harness.hpp"
#include "../common/hdr_rules.hpp"
#include "../../discount/ckpt_layout.h"

static int equiv(const std::string &ref, const std::string &obs,
	const char *mode = "")
{
	test::TempDir d;
	test::write_file(d / "r", ref);
	test::write_file(d / "o", obs);
	std::string cmd = dctest::env_or("DC_EQUIV", "dc-equiv") + " " + mode +
		" " + (d / "r") + " " + (d / "o") + " > /dev/null";
	int rc = system(cmd.c_str());
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST_CASE("dc-equiv: identical except for duplicates of earlier events",
	"[equiv]")
{
	REQUIRE(equiv("a\nb\nc\n", "a\nb\nc\n") == 0);
	REQUIRE(equiv("a\nb\nc\n", "a\nb\nb\nc\n") == 0);        // last redone
	REQUIRE(equiv("a\nb\nc\nd\n", "a\nb\nc\nb\nc\nd\n") == 0); // several
	REQUIRE(equiv("a\nb\n", "a\nb\na\n") == 0);   // trailing duplicate
	REQUIRE(equiv("a\r\nb\r\n", "a\nb\n") == 0);  // terminal line ends
	REQUIRE(equiv("a\nb\nc\n", "a\nc\n") == 1);   // lost event
	REQUIRE(equiv("a\nb\nc\n", "a\nx\nb\nc\n") == 1); // foreign event
	REQUIRE(equiv("a\nb\n", "b\na\n") == 1);      // reordered
	REQUIRE(equiv("a\nb\n", "a\n") == 1);         // incomplete
}

TEST_CASE("dc-equiv --events: one event per write, escaped", "[equiv]")
{
	// a line written in three calls, its start written again after a
	// recovery: in lines, a foreign line; in events, two duplicates
	std::string ref = "sum: \n42\n\\n\n";
	std::string obs = "sum: \n42\nsum: \n42\n\\n\n";
	REQUIRE(equiv(ref, obs, "--events") == 0);
	REQUIRE(equiv("sum: 42\n", "sum: 42sum: 42\n") == 1);
	REQUIRE(equiv(ref, "sum: \n43\n\\n\n", "--events") == 1); // foreign
	REQUIRE(equiv(ref, "sum: \n42\n", "--events") == 1);        // lost
	// an event's escaped \r is part of it (no terminal line end)
	REQUIRE(equiv("a\\r\\n\n", "a\\n\n", "--events") == 1);
	REQUIRE(equiv("a\r\nb\r\n", "a\nb\n") == 0);
}

TEST_CASE("dc-run --events records each write of a recovered program",
	"[events]")
{
	// the recovered run writes its line again from the start: its output
	// is a line the failure-free run never wrote, its events are the
	// failure-free run's and duplicates
	test::TempDir d;
	std::string prog = dctest::env_or("DC_TEST_EVENTS", "dc-test-events");
	int st;
	std::string ref = dctest::run_capture({ prog, d / "ck1", "run" }, &st,
		{ "DC_EVENTS=" + (d / "ref.ev") });
	REQUIRE(WIFEXITED(st));
	REQUIRE(ref == "sum: 42\n");
	std::string obs = dctest::run_capture({ prog, d / "ck2", "kill" }, &st,
		{ "DC_EVENTS=" + (d / "obs.ev") });
	REQUIRE(WIFSIGNALED(st));
	obs += dctest::run_capture({ prog, d / "ck2", "kill" }, &st,
		{ "DC_EVENTS=" + (d / "obs.ev") });
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(obs == "sum: 42sum: 42\n");
	REQUIRE(test::read_file(d / "ref.ev") == "sum: \n42\n\\n\n");
	REQUIRE(test::read_file(d / "obs.ev") ==
		"sum: \n42\nsum: \n42\n\\n\n");
	REQUIRE(equiv(ref, obs) == 1); // lines: falsely not equivalent
	REQUIRE(equiv(test::read_file(d / "ref.ev"),
			test::read_file(d / "obs.ev"), "--events") == 0);
}

static std::string counter(const std::string &dir, int n, int kill_ms)
{
	int st;
	return dctest::run_capture({ dctest::env_or("DC_COUNTER", "dc-counter"),
		dir, std::to_string(n) }, &st, {}, kill_ms);
}

TEST_CASE("linked example continues from its last checkpoint after "
	  "SIGKILL", "[linked]")
{
	// every dirty-tracking mechanism; recovered runs keep tracking
	test::TempDir d;
	std::string dir = d / "ck";
	const char *tr = GENERATE("uffd", "wp", "undo");
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	std::string a = counter(dir, 40, 300);
	REQUIRE(a.find("step 3 ") != std::string::npos);
	REQUIRE(a.find("step 39 ") == std::string::npos);
	std::string b = counter(dir, 40, 0);
	// resumes where it was: no step from the start again, totals right
	REQUIRE(b.find("step 0 ") == std::string::npos);
	REQUIRE(b.find("step 39 total 780 heap 40 (recovered)") !=
		std::string::npos);
	// a finished run leaves no checkpoint behind
	REQUIRE(!test::exists(dir + "/ctl"));
}

TEST_CASE("a checkpoint of another program is refused, nothing changed",
	"[linked]")
{
	test::TempDir d;
	std::string dir = d / "ck";
	std::string a = counter(dir, 40, 200);
	REQUIRE(test::exists(dir + "/ctl"));
	// bc under dc-run with the counter's directory
	int st;
	std::string out = dctest::run_capture({ dctest::env_or("DC_RUN",
		"dc-run"), "--dir", dir, "--", "bc", "-q" }, &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 70);
	REQUIRE(out.find("recovery refused") != std::string::npos);
	// the checkpoint is still there and still recovers its program
	std::string b = counter(dir, 40, 0);
	REQUIRE(b.find("(recovered)") != std::string::npos);
}

TEST_CASE("fork and stream sockets are refused at the call", "[refuse]")
{
	test::TempDir d;
	int st;
	// sh -c would fork: dc-run runs the shell, the shell's fork is refused
	std::string out = dctest::run_capture({ dctest::env_or("DC_RUN",
		"dc-run"), "--dir", d / "ck", "--", "sh", "-c",
		"/bin/true; echo after" }, &st);
	INFO(out);
	REQUIRE(out.find("refused fork (libdc checkpoints one process): the "
			 "call fails with EPERM; the program goes on and stays "
			 "recoverable") != std::string::npos);
	REQUIRE(out.find("could not be recovered") == std::string::npos);

	out = dctest::run_capture({ dctest::env_or("DC_RUN", "dc-run"),
		"--dir", d / "ck2", "--", "lua5.4", "-e",
		"local f = io.popen('true'); print(f and 'opened' or 'no')" },
		&st);
	INFO(out);
	REQUIRE(out.find("refused") != std::string::npos);
}

TEST_CASE("dc_status reports a missing or corrupt directory", "[refuse]")
{
	test::TempDir d;
	struct dc_status st;
	DC_REQUIRE_RC(dc_status((d / "none").c_str(), &st), DC_ENOCKPT);
	// garbage without a valid commit record: a crash while the directory
	// was created; nothing to recover
	REQUIRE(mkdir((d / "bad").c_str(), 0700) == 0);
	test::write_file(d / "bad/ctl", std::string(65536 + 4096, 'x'));
	DC_REQUIRE_RC(dc_status((d / "bad").c_str(), &st), DC_ENOCKPT);
	// a committed checkpoint whose superblock is damaged is corrupt
	std::string ck = d / "ck";
	counter(ck, 40, 200);
	DC_REQUIRE_OK(dc_status(ck.c_str(), &st));
	REQUIRE(st.generation >= 1);
	int fd = open((ck + "/ctl").c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, "X", 1, RIO_POOL_HDR_SIZE + 100) == 1);
	close(fd);
	DC_REQUIRE_RC(dc_status(ck.c_str(), &st), DC_ECORRUPT);
	enum dc_protocol pr;
	DC_REQUIRE_RC(dc_protocol_parse("nope", &pr), DC_EPROTOCOL);
	DC_REQUIRE_OK(dc_protocol_parse("CBNDVS-LOG", &pr));
	REQUIRE(pr == DC_CBNDVS_LOG);
	DC_REQUIRE_RC(dc_checkpoint(), DC_ENOTINIT);
}

TEST_CASE("superblock header rules: one test per rule, a refusal changes "
	  "nothing",
	"[refuse][hdr]")
{
	using R = hdr_rules::Rule<dc_superblock>;
	test::TempDir d;
	std::string ck = d / "ck", ctl = ck + "/ctl";
	counter(ck, 40, 200);
	struct dc_status st;
	DC_REQUIRE_OK(dc_status(ck.c_str(), &st));
	// The superblock has no compat or ro_compat mask, and no feature
	// code: an unknown incompat bit is a newer format (DC_EVERSION).
	hdr_rules::run(hdr_rules::files({ ctl }),
		std::vector<R>{
			{ "bad magic", [](dc_superblock &s) { s.magic ^= 1; },
				DC_ECORRUPT },
			{ "newer major", [](dc_superblock &s) { s.major++; },
				DC_EVERSION },
			{ "older major", [](dc_superblock &s) { s.major--; },
				DC_EVERSION },
			{ "newer minor accepted",
				[](dc_superblock &s) { s.minor++; }, 0 },
			{ "unknown incompat refused",
				[](dc_superblock &s) { s.incompat |= 1u << 30; },
				DC_EVERSION },
			{ "non-zero reserved refused",
				[](dc_superblock &s) {
					s.reserved[sizeof(s.reserved) - 1] = 1;
				},
				DC_ECORRUPT },
		},
		[&](const std::function<void(dc_superblock &)> &fn) {
			struct dc_superblock sb;
			std::string f = test::read_file(ctl);
			REQUIRE(f.size() >= RIO_POOL_HDR_SIZE + sizeof(sb));
			memcpy(&sb, f.data() + RIO_POOL_HDR_SIZE, sizeof(sb));
			fn(sb);
			sb.checksum = rio_checksum(&sb, 4088, DC_SB_SEED);
			test::patch_file(ctl, RIO_POOL_HDR_SIZE, &sb,
				sizeof(sb));
		},
		[&](bool) {
			struct dc_status s;
			return dc_status(ck.c_str(), &s);
		});
}

// Runs dc-test-files until it finishes by itself (at most 4 runs); the
// first run gets DC_CRASH_AT.  Returns the finished run's output.
static std::string files_until_done(const std::string &dir,
	const std::string &work, const std::string &crash_at,
	const std::string &redo_max, int *runs)
{
	std::string out;
	for (*runs = 1; *runs <= 4; (*runs)++) {
		std::vector<std::string> env;
		if (!redo_max.empty())
			env.push_back("DC_TEST_REDO_MAX=" + redo_max);
		if (*runs == 1 && !crash_at.empty())
			env.push_back("DC_CRASH_AT=" + crash_at);
		int st;
		out = dctest::run_capture({ dctest::env_or("DC_TEST_FILES",
			"dc-test-files"), dir, work }, &st, env);
		INFO(out);
		if (WIFEXITED(st)) {
			REQUIRE(WEXITSTATUS(st) == 0);
			return out;
		}
		REQUIRE(WIFSIGNALED(st));
		REQUIRE(WTERMSIG(st) == SIGKILL);
	}
	FAIL("dc-test-files did not finish");
	return out;
}

static const char files_at_checkpoint[] =
	"resumed (held h)\n"
	"emptied=full|\n"
	"gone=still here|\n"
	"grow=abc|\n"
	"keep=original|\n"
	"moved=m|\n"
	"shrink=0123456789|\n"
	"victim=v|\n";

TEST_CASE("recovery undoes the file changes of the lost interval",
	"[files]")
{
	// created, overwritten, extended, truncated, unlinked, renamed and
	// O_TRUNC'ed files are all as at the checkpoint, after a crash in the
	// interval or inside the commit; with the redo log kept (default) or
	// flushed into the shadow at every commit (redo_max 1); with the
	// default tracking and with the memory in the persistent segment
	const char *tr = GENERATE("uffd", "undo");
	dctest::Tracking use(tr);
	const char *points[] = { "", "redo:2", "committed:2", "apply:2" };
	for (const char *base : { "/dev/shm", "/var/tmp" })
	for (const char *redo_max : { "", "1" })
	for (const char *at : points) {
		// /var/tmp: a disk file system (ext4 here), where every log
		// entry and checkpoint is synced
		if (!strcmp(base, "/var/tmp") && at[0] && strcmp(at, "apply:2"))
			continue;
		test::TempDir d(base);
		std::string work = d / "work";
		REQUIRE(mkdir(work.c_str(), 0700) == 0);
		int runs = 0;
		std::string out = files_until_done(d / "ck", work, at,
			redo_max, &runs);
		INFO("DC_CRASH_AT=" << at << " redo_max=" << redo_max
				    << " runs=" << runs << " in " << base
				    << " tracking " << tr);
		REQUIRE(out == files_at_checkpoint);
		// the hidden names of delayed deletions are gone too
		for (auto &n : test::list_dir(work))
			REQUIRE(n.rfind(".dc-del-", 0) != 0);
		REQUIRE(runs == (std::string(at).rfind("redo", 0) == 0 ? 3 : 2));
	}
}

TEST_CASE("writes into cold regions or write-protected pages, by the "
	  "kernel or a store, are checkpointed", "[cold]")
{
	test::TempDir d;
	std::string in = d / "in";
	test::write_file(in, std::string(4096, 'b') + std::string(4096, 'd'));
	std::string big(6000, 'q');
	REQUIRE(setxattr(in.c_str(), "user.big", big.data(), big.size(), 0) ==
		0);
	const char *tr = GENERATE("uffd", "wp", "undo");
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	std::string out;
	for (int run = 0; run < 2; run++) {
		int st;
		out = dctest::run_capture({ dctest::env_or("DC_TEST_COLD",
			"dc-test-cold"), d / "ck", in }, &st);
		INFO(out);
		if (run == 0) { // killed itself after the last checkpoint
			REQUIRE(WIFSIGNALED(st));
			REQUIRE(WTERMSIG(st) == SIGKILL);
		} else {
			REQUIRE(WIFEXITED(st));
			REQUIRE(WEXITSTATUS(st) == 0);
		}
	}
	REQUIRE(out == "resumed b b c d b d q q\n");
}

// dc-test-coldmerge: a region made read-only because it was idle (cold)
// merged by the kernel with its read-only neighbour into one mapping, then
// a fold, a kill and a recovery.  Returns the recovered run's output, its
// wait status in *st.
static std::string coldmerge_run(const std::string &prog, int *st)
{
	test::TempDir d;
	std::string out = dctest::run_capture({ prog, d / "ck" }, st);
	INFO(out);
	REQUIRE(WIFSIGNALED(*st)); // killed itself after its checkpoint
	REQUIRE(WTERMSIG(*st) == SIGKILL);
	return dctest::run_capture({ prog, d / "ck" }, st);
}

TEST_CASE("a fold after two regions' cold mappings merged records the "
	  "program's protection, so the recovered memory is writable",
	  "[coldmerge]")
{
	int st;
	std::string out = coldmerge_run(dctest::env_or("DC_TEST_COLDMERGE",
		"dc-test-coldmerge"), &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == "resumed A A 0\n");
}

TEST_CASE("a fold that keeps the cold protection of a merged mapping is "
	  "caught", "[coldmerge-broken]")
{
	int st;
	std::string out = coldmerge_run(dctest::env_or(
		"DC_TEST_COLDMERGE_BROKEN", "dc-test-coldmerge-broken"), &st);
	INFO(out);
	// the recovered memory is read-only: the store after the resume
	// faults
	REQUIRE(WIFSIGNALED(st));
	REQUIRE(WTERMSIG(st) == SIGSEGV);
}

// prog DIR STAGE kills itself; run again, it resumes: the second run's
// output, its wait status in *st.
static std::string killed_then_run(const std::string &prog, int stage,
	int *st)
{
	test::TempDir d;
	std::string out = dctest::run_capture({ prog, d / "ck",
		std::to_string(stage) }, st);
	INFO(out);
	REQUIRE(WIFSIGNALED(*st));
	REQUIRE(WTERMSIG(*st) == SIGKILL);
	return dctest::run_capture({ prog, d / "ck", std::to_string(stage) },
		st);
}

// ... and must say "resumed STAGE ok" (seg_prog.c, hist_prog.c,
// part_prog.c).
static void killed_then_resumed(const std::string &prog, int stage)
{
	int st;
	std::string out = killed_then_run(prog, stage, &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == "resumed " + std::to_string(stage) + " ok\n");
}

// dc-test-coldsig under `dc-run --protocol periodic --interval 5` with
// the library given; DC_TEST_SEGV_TICK=1 (test builds) sends the timer's
// signal at every cold-region fault, between the fault and its check
// (sud.c invariant 6).  The output and wait status; *stats gets the
// run's counters.
static std::string coldsig_run(const std::string &lib, int *st,
	std::string *stats = nullptr)
{
	test::TempDir d;
	std::string prog = dctest::env_or("DC_TEST_COLDSIG", "dc-test-coldsig");
	std::string out = dctest::run_capture({ dctest::env_or("DC_RUN",
		"dc-run"), "--dir", d / "ck", "--protocol", "periodic",
		"--interval", "5", "--stats", d / "stats", "--", prog, "12",
		"8" }, st, { "DC_LIB=" + lib, "DC_TEST_SEGV_TICK=1" });
	if (stats)
		*stats = test::read_file(d / "stats");
	return out;
}

TEST_CASE("a checkpoint tick between a cold-region fault and its check "
	  "changes nothing: the output of a run without libdc", "[coldsig]")
{
	int st;
	std::string ref = dctest::run_capture({ dctest::env_or(
		"DC_TEST_COLDSIG", "dc-test-coldsig"), "12", "8" }, &st);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(ref == "sum 96\n");
	std::string stats;
	std::string out = coldsig_run(dctest::env_or("DC_TEST_LIB",
		"libdc_test.so"), &st, &stats);
	INFO(out << stats);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == ref);
	// the slots did turn cold: the stores above were cold-region faults
	REQUIRE(dctest::stat_of(stats, "cooled") >= 8);
}

TEST_CASE("a SIGSEGV handler that lets the tick commit before the check "
	  "is caught", "[coldsig-broken]")
{
	int st;
	std::string out = coldsig_run(dctest::env_or("DC_BROKEN_SEGV_LIB",
		"libdc_broken_segv.so"), &st);
	INFO(out);
	REQUIRE(WIFSIGNALED(st));
	REQUIRE(WTERMSIG(st) == SIGSEGV);
	REQUIRE(out != "sum 96\n");
}

TEST_CASE("mremap, madvise, mprotect and munmap of checkpointed memory "
	  "roll back with it", "[seg]")
{
	// every tracking; with "undo" the memory is the persistent segment,
	// and each of these calls would change it behind the undo log
	const char *tr = GENERATE("uffd", "wp", "undo");
	const int stage = GENERATE(1, 2);
	INFO("tracking " << tr << ", killed at stage " << stage);
	dctest::Tracking use(tr);
	killed_then_resumed(dctest::env_or("DC_TEST_SEG", "dc-test-seg"),
		stage);
}

TEST_CASE("a full undo log stops the process, and the checkpoint is "
	  "intact", "[seg]")
{
	dctest::Tracking use("undo");
	test::TempDir d;
	std::string prog = dctest::env_or("DC_TEST_SEG", "dc-test-seg");
	int st;
	// the test build of libdc: the log "fills up" at 1 MiB
	setenv("DC_TEST_MUNDO_MAX", "1048576", 1);
	std::string out = dctest::run_capture({ prog, d / "ck", "3" }, &st);
	unsetenv("DC_TEST_MUNDO_MAX");
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 70);
	REQUIRE(out.find("undo log cannot take a before-image") !=
		std::string::npos);
	out = dctest::run_capture({ prog, d / "ck", "3" }, &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == "resumed 1 ok\n");
}

// dc-test-image (prog) three times on one directory, every commit flushing
// into the shadow: killed after checkpoint 1, resumed (its memory mapped
// from the image) and killed after checkpoint 2, resumed.  The last run's
// output and wait status.
static std::string image_runs(const std::string &prog, int *st)
{
	test::TempDir d;
	const std::vector<std::string> env = { "DC_TEST_REDO_MAX=1" };
	for (int run = 1; run <= 2; run++) {
		std::string out = dctest::run_capture({ prog, d / "ck" }, st,
			env);
		INFO("run " << run << ": " << out);
		if (!WIFSIGNALED(*st) || WTERMSIG(*st) != SIGKILL)
			return out;
	}
	return dctest::run_capture({ prog, d / "ck" }, st, env);
}

TEST_CASE("memory mapped from the image at recovery keeps its bytes "
	  "through mremap, madvise, munmap and mprotect", "[image]")
{
	const char *tr = GENERATE("uffd", "wp");
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	int st;
	std::string out = image_runs(dctest::env_or("DC_TEST_IMAGE",
		"dc-test-image"), &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == "resumed 2 ok\n");

	// the broken build leaves the memory mapped from the shadow:
	// MADV_DONTNEED gives the image's bytes back, and the moved block's
	// pages follow file offsets the next flush punches
	std::string broken = dctest::env_or("DC_TEST_IMAGE_BROKEN", "");
	REQUIRE(!broken.empty());
	out = image_runs(broken, &st);
	INFO("broken build: " << out);
	REQUIRE(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

// dc-test-dlopen (prog) killed after its checkpoint, then run again: the
// recovered run's output and wait status.
static std::string dlopen_run(const std::string &prog, int *st)
{
	test::TempDir d;
	std::string lib = dctest::env_or("DC_TEST_DLLIB", "");
	REQUIRE(!lib.empty());
	std::string out = dctest::run_capture({ prog, d / "ck", lib }, st);
	INFO(out);
	REQUIRE(WIFSIGNALED(*st));
	REQUIRE(WTERMSIG(*st) == SIGKILL);
	return dctest::run_capture({ prog, d / "ck", lib }, st);
}

TEST_CASE("a library loaded with dlopen after the first checkpoint comes "
	  "back relocated", "[dlopen]")
{
	const char *tr = GENERATE("uffd", "wp", "undo");
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	int st;
	std::string out = dlopen_run(dctest::env_or("DC_TEST_DLOPEN",
		"dc-test-dlopen"), &st);
	INFO(out);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == "resumed ops 42 6 2 same\n");

	// the broken build maps the library's RELRO part from its file
	// again: the recovered run calls through unrelocated pointers
	std::string broken = dctest::env_or("DC_TEST_DLOPEN_BROKEN", "");
	REQUIRE(!broken.empty());
	out = dlopen_run(broken, &st);
	INFO("broken build: " << out);
	REQUIRE(!(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		out == "resumed ops 42 6 2 same\n"));
}

// Run argv with standard input from a pipe the caller writes `input` to
// (kept open), standard output and error into a pipe; SIGKILL it once
// `marker` has been printed (marker empty: let it finish).  The output read in *out; returns the wait status.
static int run_until(const std::vector<std::string> &argv,
	const std::vector<std::string> &env, const std::string &input,
	const std::string &marker, std::string *out)
{
	int in[2], o[2];
	REQUIRE(pipe(in) == 0);
	REQUIRE(pipe(o) == 0);
	pid_t pid = dctest::spawn(argv, in[0], o[1], "/", env);
	close(in[0]);
	close(o[1]);
	REQUIRE(write(in[1], input.data(), input.size()) ==
		(ssize_t)input.size());
	out->clear();
	char buf[4096];
	bool killed = false;
	uint64_t deadline = dctest::now_ms() + 60000;
	for (;;) {
		struct pollfd pf = { o[0], POLLIN, 0 };
		if (poll(&pf, 1, 1000) == 0) {
			if (dctest::now_ms() < deadline)
				continue;
			kill(pid, SIGKILL); // stuck: the output says where
			*out += "\n(stuck: killed)\n";
			killed = true;
		}
		ssize_t n = read(o[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		out->append(buf, (size_t)n);
		if (!marker.empty() && !killed &&
		    out->find(marker) != std::string::npos) {
			kill(pid, SIGKILL);
			killed = true;
		}
	}
	close(o[0]);
	close(in[1]);
	int st;
	waitpid(pid, &st, 0);
	return st;
}

// The interpreter (/usr/bin/python3), or "" (and a warning: the test is
// skipped) where it is missing.
static std::string python3()
{
	std::string py = dctest::env_or("DC_PYTHON", "");
	if (py.empty() || !test::exists(py)) {
		WARN("no /usr/bin/python3: skipped");
		return "";
	}
	return py;
}

// python3 (py) under dc-run with libdc lib ("": dc-run's own), tracking
// tr: killed after "two", recovered and killed again there, then recovered
// and fed "go".  True when the last run finished with the right output.
static bool python_dlopen(const std::string &py, const char *tr,
	const std::string &lib)
{
	// _bz2 is loaded (with libbz2) before the checkpoint of "one",
	// _lzma (with liblzma) after it, before the checkpoint of "two";
	// the kill comes after "two", and the recovered run calls both
	// (their method tables and GOTs are in their RELRO parts) and exits
	// through the interpreter's finalisation
	const std::string prog =
		"import sys, _bz2\n"
		"def bz():\n"
		"    c = _bz2.BZ2Compressor()\n"
		"    z = c.compress(b'abc' * 300) + c.flush()\n"
		"    return _bz2.BZ2Decompressor().decompress(z) == b'abc' * 300\n"
		"def say(s):\n"
		"    sys.stdout.write(s + '\\n')  # one write: one event\n"
		"    sys.stdout.flush()\n"
		"say('one %s' % bz())\n"
		"import _lzma\n"
		"def xz():\n"
		"    c = _lzma.LZMACompressor()\n"
		"    z = c.compress(b'q' * 500) + c.flush()\n"
		"    return _lzma.LZMADecompressor().decompress(z) == b'q' * 500\n"
		"say('two %s' % xz())\n"
		"line = sys.stdin.readline().strip()\n"
		"say('after %s %s %s' % (line, bz(), xz()))\n";
	test::TempDir d;
	test::write_file(d / "p.py", prog);
	std::vector<std::string> argv = { dctest::env_or("DC_RUN", "dc-run"),
		"--dir", d / "ck", "--protocol", "cpvs", "--tracking", tr,
		"--", py, "-S", d / "p.py" };
	std::vector<std::string> env;
	if (!lib.empty())
		env.push_back("DC_LIB=" + lib);
	std::string out;
	int st = run_until(argv, env, "", "two True\n", &out);
	INFO(out);
	REQUIRE(WIFSIGNALED(st));
	REQUIRE(out.find("two True") != std::string::npos);
	// the recovered run resumes before "two" is printed, and is killed
	// again after it; the next recovers from a checkpoint the recovered
	// process took, and finishes
	st = run_until(argv, env, "", "two True\n", &out);
	INFO("recovered: " << out);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL ||
	    out.find("two True") == std::string::npos)
		return false;
	st = run_until(argv, env, "go\n", "", &out);
	INFO("recovered again: " << out);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		out.find("after go True True\n") != std::string::npos &&
		out.find("one") == std::string::npos;
}

TEST_CASE("python3 with C extensions imported before and after a "
	  "checkpoint survives SIGKILL", "[dlopen]")
{
	std::string py = python3();
	if (py.empty())
		return;
	const char *tr = GENERATE("uffd", "wp", "undo");
	INFO("tracking " << tr);
	REQUIRE(python_dlopen(py, tr, ""));
	// the broken build maps the extensions' RELRO parts from their files
	// again: the recovered interpreter must not come through
	std::string broken = dctest::env_or("DC_BROKEN_COW_LIB", "");
	REQUIRE(!broken.empty());
	REQUIRE(!python_dlopen(py, tr, broken));
}

TEST_CASE("stores after mprotect, mremap, madvise, brk and guard pages "
	  "are resolved and roll back", "[hist]")
{
	// every tracking; a store libdc does not resolve kills the first
	// run with SIGSEGV, a store it does not record comes back wrong
	const char *tr = GENERATE("uffd", "wp", "undo");
	const int stage = GENERATE(1, 2, 3, 4, 5);
	INFO("tracking " << tr << ", killed after checkpoint " << stage);
	dctest::Tracking use(tr);
	killed_then_resumed(dctest::env_or("DC_TEST_HIST", "dc-test-hist"),
		stage);
}

TEST_CASE("stores after an mprotect that makes tracked memory writable, "
	  "not recorded, are caught", "[hist]")
{
	// the broken build: wp, P (a PROT_NONE reservation at the first
	// checkpoint, made writable and written) comes back empty from the
	// second; undo, Q (read-only at the first checkpoint: moved, never
	// write-protected) keeps the stores made after it
	const char *tr = GENERATE("wp", "undo");
	bool wp = !strcmp(tr, "wp");
	std::string stage = wp ? "2" : "1";
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	test::TempDir d;
	std::string prog = dctest::env_or("DC_TEST_HIST_BROKEN", "");
	REQUIRE(!prog.empty());
	int st;
	std::string out = dctest::run_capture({ prog, d / "ck", stage }, &st);
	INFO(out);
	REQUIRE(WIFSIGNALED(st));
	out = dctest::run_capture({ prog, d / "ck", stage }, &st);
	INFO(out);
	REQUIRE(out.find(wp ? "check failed: P at c2" :
			      "check failed: Q at c1") != std::string::npos);
}

TEST_CASE("stores beside a mapping change that touches part of a region, "
	  "and frames of a grown stack, are checkpointed", "[part]")
{
	// a madvise over some pages of a mapping, the program break moved
	// within the heap's last page: the fold must leave the interval's
	// other stores in those regions to the scan (ckpt.c invariant 5);
	// the stack grown by a recursion, with no mapping change since the
	// last fold: its frames must be in the checkpoint taken at the
	// bottom (invariant 6)
	const char *tr = GENERATE("uffd", "wp", "undo");
	const int stage = GENERATE(1, 2, 3);
	INFO("tracking " << tr << ", killed after checkpoint " << stage);
	dctest::Tracking use(tr);
	killed_then_resumed(dctest::env_or("DC_TEST_PART", "dc-test-part"),
		stage);
}

TEST_CASE("a fold that write-protects the whole of a region a change "
	  "touched in part is caught", "[part]")
{
	// the broken build protects the region whole before the scan: the
	// store into A's first page, made before the madvise, is lost
	dctest::Tracking use("uffd");
	std::string prog = dctest::env_or("DC_TEST_PART_BROKEN_FOLD", "");
	REQUIRE(!prog.empty());
	int st;
	std::string out = killed_then_run(prog, 2, &st);
	INFO(out);
	REQUIRE(out.find("check failed: A at c2: the store beside the "
			 "madvise") != std::string::npos);
}

TEST_CASE("a commit that does not notice the grown stack is caught",
	"[part]")
{
	// the broken build takes the checkpoint at the bottom of the
	// recursion without a fold: the frames below the stack region of the
	// last fold are in no checkpoint, and the resumed run does not come
	// back up through them
	const char *tr = GENERATE("uffd", "wp");
	INFO("tracking " << tr);
	dctest::Tracking use(tr);
	std::string prog = dctest::env_or("DC_TEST_PART_BROKEN_STACK", "");
	REQUIRE(!prog.empty());
	int st;
	std::string out = killed_then_run(prog, 3, &st);
	INFO(out);
	REQUIRE(out != "resumed 3 ok\n");
	REQUIRE(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

// Output of argv run with standard input from the file `in` and standard
// output and error on a pseudo-terminal (a screen: every line a visible
// event); its wait status in *st.
static std::string run_on_pty(const std::vector<std::string> &argv,
	const std::string &in, int *st)
{
	int fd = open(in.c_str(), O_RDONLY);
	REQUIRE(fd >= 0);
	int m, s;
	REQUIRE(openpty(&m, &s, nullptr, nullptr, nullptr) == 0);
	pid_t pid = dctest::spawn(argv, fd, s, "/", {});
	close(s);
	close(fd);
	std::string out;
	char buf[4096];
	for (;;) {
		ssize_t n = read(m, buf, sizeof(buf));
		if (n <= 0)
			break; // EIO: the program and its pty are gone
		out.append(buf, (size_t)n);
	}
	close(m);
	waitpid(pid, st, 0);
	return out;
}

TEST_CASE("python3 reading a file and printing to a terminal runs to the "
	  "end under every tracking", "[hist]")
{
	std::string py = python3();
	if (py.empty())
		return;
	// a sieve over numbers read from standard input, 400 lines printed:
	// pymalloc's arenas and the heap grow, shrink and are written in
	// between the checkpoints before each line
	const char *tr = GENERATE("uffd", "wp", "undo");
	INFO("tracking " << tr);
	test::TempDir d;
	std::string nums;
	for (int i = 0; i < 300; i++)
		nums += std::to_string(1000 + (i * 7919) % 150000) + " ";
	test::write_file(d / "nums.txt", nums + "\n");
	test::write_file(d / "sieve.py",
		"import sys\n"
		"nums = [int(x) for x in sys.stdin.read().split()]\n"
		"N = max(nums)\n"
		"s = bytearray([1]) * (N + 1)\n"
		"s[0] = s[1] = 0\n"
		"for i in range(2, int(N ** 0.5) + 1):\n"
		"    if s[i]:\n"
		"        s[i*i::i] = bytearray(len(range(i*i, N + 1, i)))\n"
		"primes = [i for i in range(N + 1) if s[i]]\n"
		"d = {p: str(p) * (k % 7 + 1) for k, p in enumerate(primes)}\n"
		"for line in range(400):\n"
		"    q = nums[line % len(nums)]\n"
		"    c = sum(1 for p in primes if p <= q)\n"
		"    print(line, q, c, len(d[primes[c - 1]]))\n");
	int st;
	std::string ref = run_on_pty({ py, "-S", d / "sieve.py" },
		d / "nums.txt", &st);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	std::string out = run_on_pty({ dctest::env_or("DC_RUN", "dc-run"),
		"--dir", d / "ck", "--protocol", "cpvs", "--tracking", tr,
		"--stats", d / "stats", "--", py, "-S", d / "sieve.py" },
		d / "nums.txt", &st);
	INFO(out.substr(out.size() > 300 ? out.size() - 300 : 0));
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(out == ref);
	// a checkpoint before every line
	REQUIRE(dctest::stat_of(test::read_file(d / "stats"),
			"checkpoints") > 400);
}

// One kill inside recovery: dc-test-files kills itself in its interval,
// its recovery run is killed at recovery step `step` (DC_CRASH_AT=rstep:N,
// the test build), then it is run until it finishes.  Returns "" when the
// files came back as at the checkpoint with no hidden name left, else
// what went wrong; *beyond: the recovery run had fewer steps and finished.
static std::string kill_in_recovery(const std::string &prog, int step,
	bool *beyond)
{
	test::TempDir d;
	std::string work = d / "work", dir = d / "ck";
	REQUIRE(mkdir(work.c_str(), 0700) == 0);
	int st;
	std::string out = dctest::run_capture({ prog, dir, work }, &st);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		return "first run did not kill itself: " + out;
	out = dctest::run_capture({ prog, dir, work }, &st,
		{ "DC_CRASH_AT=rstep:" + std::to_string(step) });
	*beyond = WIFEXITED(st);
	if (!*beyond && (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL))
		return "recovery run died of something else: " + out;
	for (int run = 0; !WIFEXITED(st) && run < 3; run++)
		out = dctest::run_capture({ prog, dir, work }, &st);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return "not recovered after a kill at recovery step " +
			std::to_string(step) + ": " + out;
	if (out != files_at_checkpoint)
		return "files differ after a kill at recovery step " +
			std::to_string(step) + ":\n" + out;
	for (auto &n : test::list_dir(work))
		if (n.rfind(".dc-del-", 0) == 0)
			return "hidden file " + n + " left after a kill at "
				"recovery step " + std::to_string(step);
	return "";
}

TEST_CASE("a kill at any step of recovery is recovered by running again",
	"[rkill]")
{
	// every step: the redo and memory undo phases, each file undo
	// (write, truncate, create, unlink, rename, rename over a file) and
	// its cut off the log, the incarnation, every region rebuilt, every
	// descriptor reopened (a deleted file among them), the delayed
	// deletions after the resume
	std::string prog = dctest::env_or("DC_TEST_FILES", "dc-test-files");
	int points = 0;
	bool beyond = false;
	for (int step = 1; !beyond && step < 1000; step++) {
		std::string why = kill_in_recovery(prog, step, &beyond);
		INFO(why);
		REQUIRE(why.empty());
		if (!beyond)
			points++;
	}
	WARN(points << " kill points inside recovery");
	REQUIRE(beyond);
	REQUIRE(points >= 50);
}

TEST_CASE("an undo that does not cut its log is caught by kills inside "
	  "recovery", "[rkill-broken]")
{
	// the broken build applies the whole file undo again after a kill:
	// a file it has already removed is written to, or a rename back
	// moves a restored file over another
	std::string prog = dctest::env_or("DC_TEST_FILES_BROKEN", "");
	REQUIRE(!prog.empty());
	bool beyond = false;
	std::string caught;
	for (int step = 1; caught.empty() && !beyond && step < 1000; step++)
		caught = kill_in_recovery(prog, step, &beyond);
	WARN("broken build caught: " << caught);
	REQUIRE(!caught.empty());
}

// dc-test-tty on a 24-row pseudo-terminal: killed after its checkpoint
// in raw mode, the terminal set back to cooked mode (as a shell does), run
// again.  Returns the recovered run's line.
static std::string tty_recovered(const std::string &prog)
{
	test::TempDir d;
	int m, s;
	struct winsize ws = { 24, 80, 0, 0 };
	REQUIRE(openpty(&m, &s, nullptr, nullptr, &ws) == 0);
	std::string out;
	for (int run = 0; run < 2; run++) {
		pid_t pid = dctest::spawn({ prog, d / "ck", "x" }, s, s, "/", {});
		int st;
		while (waitpid(pid, &st, WNOHANG) == 0) {
			struct pollfd pf = { m, POLLIN, 0 };
			if (poll(&pf, 1, 10) > 0)
				dctest::drain_once(m, out);
		}
		if (run == 0) {
			REQUIRE(WIFSIGNALED(st));
			struct termios t;
			REQUIRE(tcgetattr(s, &t) == 0);
			REQUIRE(!(t.c_lflag & ICANON)); // it was raw
			t.c_lflag |= ICANON | ECHO | ISIG;
			t.c_iflag |= ICRNL;
			t.c_oflag |= OPOST;
			REQUIRE(tcsetattr(s, TCSANOW, &t) == 0);
			out.clear();
		} else {
			REQUIRE(WIFEXITED(st));
		}
	}
	struct pollfd pf = { m, POLLIN, 0 };
	while (poll(&pf, 1, 50) > 0 && dctest::drain_once(m, out) > 0)
		;
	close(m);
	close(s);
	return out;
}

TEST_CASE("a terminal in raw mode is raw again after recovery, and the "
	  "program is asked to repaint", "[tty]")
{
	std::string out = tty_recovered(dctest::env_or("DC_TEST_TTY",
		"dc-test-tty"));
	INFO(out);
	// the first size asked after the SIGWINCH is one row short, a second
	// SIGWINCH follows, and the size asked then is the terminal's
	REQUIRE(out.find("resumed raw=1 winch=1 rows=23,24\r") !=
		std::string::npos);
}

TEST_CASE("a recovery that leaves the terminal cooked is caught",
	"[tty-broken]")
{
	std::string prog = dctest::env_or("DC_TEST_TTY_BROKEN", "");
	REQUIRE(!prog.empty());
	std::string out = tty_recovered(prog);
	WARN("broken build: " << out);
	REQUIRE(out.find("resumed raw=0") != std::string::npos);
}

TEST_CASE("a recovery that answers the window size unchanged is caught",
	"[tty-broken]")
{
	std::string prog = dctest::env_or("DC_TEST_TTY_WINCH_BROKEN", "");
	REQUIRE(!prog.empty());
	std::string out = tty_recovered(prog);
	WARN("broken build: " << out);
	// asked to repaint, but the one size it asks is the terminal's
	REQUIRE(out.find("resumed raw=1 winch=1 rows=24\r") !=
		std::string::npos);
}

TEST_CASE("each refusal says what was refused and that the program goes "
	  "on", "[refuse]")
{
	test::TempDir d;
	std::string dcrun = dctest::env_or("DC_RUN", "dc-run");
	int st;
	// a TCP connection: bash's /dev/tcp
	std::string out = dctest::run_capture({ dcrun, "--dir", d / "a", "--",
		"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9; echo went on" },
		&st);
	INFO(out);
	REQUIRE(out.find("dc: refused a TCP socket (a connection cannot be "
			 "brought back to its state at a checkpoint): the call "
			 "fails with EPERM; the program goes on and stays "
			 "recoverable") != std::string::npos);
	REQUIRE(out.find("went on") != std::string::npos);
	// a SIGSYS handler (vim installs one): not fatal
	out = dctest::run_capture({ dcrun, "--dir", d / "b", "--", "perl",
		"-e", "$SIG{SYS} = sub {}; print qq(went on\n)" }, &st);
	INFO(out);
	REQUIRE(out.find("dc: refused a handler for SIGSYS (libdc receives "
			 "every system call through SIGSYS): the call fails "
			 "with EINVAL; the program goes on") != std::string::npos);
	REQUIRE(out.find("went on") != std::string::npos);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	// glibc's nscd lookup (getpwuid in sqlite3): a Unix-domain stream
	// socket, named as such with --verbose, silent otherwise (glibc reads
	// the files itself), never "a TCP socket"
	out = dctest::run_capture({ dcrun, "--dir", d / "c", "--verbose", "--",
		"sqlite3", ":memory:", "select 40 + 2" }, &st);
	INFO(out);
	REQUIRE(out.find("dc: refused a Unix-domain stream socket (glibc's "
			 "nscd lookup") != std::string::npos);
	REQUIRE(out.find("TCP") == std::string::npos);
	REQUIRE(out.find("42") != std::string::npos);
	out = dctest::run_capture({ dcrun, "--dir", d / "e", "--", "sqlite3",
		":memory:", "select 40 + 2" }, &st);
	INFO(out);
	REQUIRE(out == "42\n");
}

// A tmux server of the test's own (its socket in dir, no configuration
// file) with one 80x24 window "t", killed with this object.
struct Tmux {
	std::string sock;
	Tmux(const std::string &dir, const std::string &cmd) :
		sock(dir + "/tmux.sock")
	{
		run("-f /dev/null new-session -d -x 80 -y 24 -s t -c " + dir +
			" '" + cmd + "'");
		run("set-option -t t remain-on-exit on");
	}
	~Tmux() { run("kill-server"); }
	Tmux(const Tmux &) = delete;
	Tmux &operator=(const Tmux &) = delete;
	std::string run(const std::string &args) const
	{
		std::string out, cmd = "tmux -S " + sock + " " + args +
			" 2>/dev/null";
		FILE *f = popen(cmd.c_str(), "r");
		char buf[4096];
		size_t n;
		while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0)
			out.append(buf, n);
		if (f)
			pclose(f);
		return out;
	}
	std::string screen() const { return run("capture-pane -p -t t"); }
	// every string of what on the screen within ms
	bool wait_for(const std::vector<std::string> &what, int ms = 5000) const
	{
		for (int t = 0; t <= ms; t += 50) {
			std::string sc = screen();
			bool all = true;
			for (auto &w : what)
				all = all && sc.find(w) != std::string::npos;
			if (all)
				return true;
			usleep(50000);
		}
		return false;
	}
	pid_t pane_pid() const
	{
		return atoi(run("list-panes -t t -F '#{pane_pid}'").c_str());
	}
	// SIGKILL to the pane's process, then its command run again the way
	// a shell would (terminal settings back to cooked, screen cleared)
	void kill_and_respawn(const std::string &cmd) const
	{
		pid_t pid = pane_pid();
		if (pid > 0 && !dead())
			kill(pid, SIGKILL);
		for (int i = 0; i < 250 && !dead(); i++)
			usleep(20000);
		run("respawn-pane -t t 'stty sane; clear; exec env " + cmd +
			"'");
	}
	bool dead() const
	{
		return run("list-panes -t t -F '#{pane_dead}'").find('1') !=
			std::string::npos;
	}
	// keys typed one every ~100 ms: '\n' is Enter, '\x1b' Escape
	void type(const std::string &keys) const
	{
		for (char c : keys) {
			if (c == '\n')
				run("send-keys -t t Enter");
			else if (c == '\x1b')
				run("send-keys -t t Escape");
			else
				run(std::string("send-keys -t t -l '") + c +
					"'");
			usleep(100000);
		}
	}
};

// sc (a curses spreadsheet) in a tmux pane under dc-run: a number typed
// in, the program killed, the pane restarted the way a shell would (the
// terminal set back to cooked mode and cleared) with the same command.
// The recovered sc must repaint its whole screen (the column header comes
// back) and take a key without Enter (raw mode).  Returns what failed, ""
// when both hold, or "skip" without tmux or sc.
static std::string tmux_sc(const std::string &lib)
{
	if (system("command -v tmux >/dev/null && command -v sc >/dev/null") !=
	    0)
		return "skip";
	test::TempDir d;
	std::string cmd = "DC_LIB=" + lib + " " +
		dctest::env_or("DC_RUN", "dc-run") + " --dir " + (d / "ck") +
		" -- sc";
	Tmux t(d.path, cmd);
	std::string why;
	if (!t.wait_for({ " B         C" }))
		why = "sc did not start:\n" + t.screen();
	t.run("send-keys -t t =");
	t.run("send-keys -t t 42 Enter");
	if (why.empty() && !t.wait_for({ "42.00" }))
		why = "sc did not take 42";
	t.kill_and_respawn(cmd);
	if (why.empty() && !t.wait_for({ " B         C" }))
		why = "screen not repainted after recovery:\n" + t.screen();
	t.run("send-keys -t t j");
	if (why.empty() && !t.wait_for({ "A1 " }))
		why = "a key without Enter not taken (terminal not raw):\n" +
			t.screen();
	return why;
}

TEST_CASE("sc in tmux is raw and repainted after recovery", "[tmux]")
{
	std::string why = tmux_sc(dctest::env_or("DC_LIB_PATH", ""));
	if (why == "skip") {
		WARN("tmux or sc missing: skipped");
		return;
	}
	INFO(why);
	REQUIRE(why.empty());
}

TEST_CASE("a recovery that neither restores the terminal nor asks for a "
	  "repaint is caught in tmux", "[tmux-broken]")
{
	std::string lib = dctest::env_or("DC_BROKEN_TTY_LIB", "");
	REQUIRE(!lib.empty());
	std::string why = tmux_sc(lib);
	if (why == "skip") {
		WARN("tmux or sc missing: skipped");
		return;
	}
	WARN("broken build: " << why);
	REQUIRE(!why.empty());
}

// nvi in a tmux pane under dc-run, typed at about ten keys a second: three
// lines inserted, one word changed, a fourth line added, and the program
// killed back in command mode once the last key shows (its checkpoint
// holds every key typed); the pane restarted as a shell would (terminal
// cooked and cleared) with the same command, more edits typed and the
// file written (:wq).  nvi redraws only when the window size changed: the
// recovered nvi must still repaint its whole screen on its own, and the
// file it writes must be the one the whole key sequence makes.  (In
// insert mode nvi ends text input at a window-size change: the kill comes
// in command mode, see docs/discount.md CAVEATS.)  Returns what failed,
// "" when all holds, or "skip" without tmux or nvi.
static std::string tmux_nvi(const std::string &lib)
{
	if (system("command -v tmux >/dev/null && command -v nvi >/dev/null") !=
	    0)
		return "skip";
	test::TempDir d;
	// no start-up file of the user's: NEXINIT replaces them, and keeps
	// nvi's recovery files in the test's directory
	std::string cmd = "HOME=" + d.path + " TMPDIR=" + d.path +
		" NEXINIT=\"set recdir=" + (d / "rec") + "\" DC_LIB=" + lib +
		" " + dctest::env_or("DC_RUN", "dc-run") + " --dir " +
		(d / "ck") + " -- nvi f.txt";
	Tmux t(d.path, cmd);
	if (!t.wait_for({ "f.txt" }))
		return "nvi did not start:\n" + t.screen();
	std::string before = "ialpha one\nbravo two\ncharlie three\x1b"
			     "k0cwBRAVO\x1bGodelta four\x1b";
	t.type(before);
	const std::vector<std::string> lines = { "alpha one", "BRAVO two",
		"charlie three", "delta four" };
	// back in command mode: the cursor left the end of the line
	bool shown = t.wait_for(lines);
	for (int i = 0; shown && i < 100 && t.run("display-message -p -t t "
	     "'#{cursor_x}'") != "9\n"; i++)
		usleep(50000);
	if (!shown)
		return "nvi did not take the keys:\n" + t.screen();
	// the pane's process is nvi itself (sh, env and dc-run exec it)
	std::string comm = test::read_file("/proc/" +
		std::to_string(t.pane_pid()) + "/comm");
	if (comm != "nvi\n")
		return "the pane runs " + comm + ", not nvi";
	t.kill_and_respawn(cmd);
	// the checkpoint recovered had read every key
	int st;
	std::string status = dctest::run_capture({ dctest::env_or("DC_RUN",
		"dc-run"), "--status", "--dir", d / "ck", "--", "nvi", "f.txt" },
		&st);
	if (status.find("input_bytes=" + std::to_string(before.size()) +
		    "\n") == std::string::npos)
		return "the kill did not follow a checkpoint of every key:\n" +
			status;
	if (!t.wait_for(lines))
		return "screen not repainted after recovery:\n" + t.screen();
	t.type("1GA!\x1b" "3Gdd" "Goecho five\x1b" ":wq\n");
	for (int i = 0; i < 200 && !t.dead(); i++)
		usleep(50000);
	std::string got = test::read_file(d / "f.txt");
	std::string want = "alpha one!\nBRAVO two\ndelta four\necho five\n";
	if (got != want)
		return "nvi wrote\n" + got + "instead of\n" + want +
			"screen:\n" + t.screen();
	return "";
}

TEST_CASE("nvi in tmux repaints after recovery and writes the file of "
	  "every key typed", "[nvi]")
{
	std::string why = tmux_nvi(dctest::env_or("DC_LIB_PATH", ""));
	if (why == "skip") {
		WARN("tmux or nvi missing: skipped");
		return;
	}
	INFO(why);
	REQUIRE(why.empty());
}

TEST_CASE("a recovery that asks nvi to repaint without a change of window "
	  "size, or not at all, is caught in tmux", "[nvi-broken]")
{
	for (const char *var : { "DC_BROKEN_WINCH_LIB", "DC_BROKEN_TTY_LIB" }) {
		std::string lib = dctest::env_or(var, "");
		REQUIRE(!lib.empty());
		std::string why = tmux_nvi(lib);
		if (why == "skip") {
			WARN("tmux or nvi missing: skipped");
			return;
		}
		WARN(var << " caught: " << why);
		REQUIRE(!why.empty());
	}
}
