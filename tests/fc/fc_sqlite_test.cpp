// SPDX-License-Identifier: BSD-3-Clause
// fc_sqlite_test.cpp -- a real program that is not ours: Debian's sqlite3
// CLI, under librio-fs.so, inserting rows in small transactions with
// PRAGMA synchronous=FULL, killed with SIGKILL at random points.
//
// Each transaction n inserts ROWS rows tagged n and sets progress = n;
// sqlite3 prints "ok n" after its COMMIT returned (the CLI flushes its
// output after each statement).  After each kill the cache is recovered --
// through the API, or (every other time) by sqlite3 itself under the shim
// -- and a plain sqlite3 (no shim: the disk as it is) checks:
// PRAGMA integrity_check is "ok", transactions 1..N are all there with
// exactly ROWS rows each and nothing else (atomicity), and N is at least
// the last acknowledged transaction (durability) and at most one more.
// Skipped (exit 77) when sqlite3 is not installed.
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "fc_util.hpp"

using fct::Env;

namespace {

const char *SQLITE = "/usr/bin/sqlite3";
const int ROWS = 4;

std::string script(int first, int count)
{
	std::ostringstream s;
	s << "PRAGMA synchronous=FULL;\n"
	  << "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, txn INTEGER,"
	     " pad BLOB);\n"
	  << "CREATE TABLE IF NOT EXISTS progress(n INTEGER);\n"
	  << "INSERT INTO progress SELECT 0 WHERE NOT EXISTS "
	     "(SELECT 1 FROM progress);\n";
	for (int n = first; n < first + count; n++) {
		s << "BEGIN;\n";
		for (int r = 0; r < ROWS; r++)
			s << "INSERT INTO t(txn, pad) VALUES(" << n
			  << ", randomblob(" << 100 + (n * 37 + r * 101) % 900
			  << "));\n";
		s << "UPDATE progress SET n = " << n << ";\nCOMMIT;\n"
		  << "SELECT 'ok', " << n << ";\n";
	}
	return s.str();
}

// Run sqlite3 on db with the SQL in file `in`; stdout to `out`.
int run_sqlite(const Env &e, const std::string &db, const std::string &in,
	const std::string &out, bool shim)
{
	std::vector<std::string> env;
	if (shim)
		env = { "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool, "RIO_FS_WRITEBACK_MS=20" };
	pid_t pid = fct::spawn({ "/bin/sh", "-c",
				       std::string(SQLITE) + " -batch " + db + " < " + in },
		env, out, e.tmp / "sqlite.err");
	return fct::wait_status(pid);
}

int last_ok(const std::string &out)
{
	std::istringstream in(out);
	std::string line;
	int n = 0;
	while (std::getline(in, line))
		if (line.rfind("ok|", 0) == 0)
			n = atoi(line.c_str() + 3);
	return n;
}

} // namespace

TEST_CASE("sqlite3 under the shim survives kill -9 with every commit",
	"[fc-sqlite]")
{
	if (!test::exists(SQLITE)) {
		WARN("sqlite3 is not installed (scripts/bootstrap.sh installs "
		     "it): skipped");
		exit(77);
	}
	Env e;
	std::string db = e.file("test.db"), sql = e.tmp / "in.sql";
	std::string out = e.tmp / "out", check = e.tmp / "check.sql";
	test::Rng rng(test::seed());
	int iterations = test::iterations(60), next = 1, acked_total = 0;
	int replayed_by_sqlite = 0;

	// (Killed before its first statement, sqlite3 may leave no tables:
	// nothing committed, which the check then sees as 0 transactions.)
	test::write_file(check,
		"PRAGMA integrity_check;\n"
		"CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, txn INTEGER,"
		" pad BLOB);\n"
		"CREATE TABLE IF NOT EXISTS progress(n INTEGER);\n"
		"SELECT 'rows', count(*), count(DISTINCT txn), "
		"coalesce(max(txn), 0), coalesce(min(txn), 0) FROM t;\n"
		"SELECT 'bad', count(*) FROM (SELECT txn, count(*) c FROM t "
		"GROUP BY txn HAVING c != " + std::to_string(ROWS) + ");\n"
		"SELECT 'progress', n FROM progress;\n");
	for (int it = 0; it < iterations; it++) {
		test::write_file(sql, script(next, 5000));
		pid_t pid = fct::spawn({ "/bin/sh", "-c",
					       "exec " + std::string(SQLITE) + " -batch " +
						       db + " < " + sql },
			{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
				"RIO_FS_POOL=" + e.pool, "RIO_FS_POOL_SIZE=4M",
				"RIO_FS_WRITEBACK_MS=20" },
			out, e.tmp / "sqlite.err");
		// One kill in four at start-up (cache open, recovery), the
		// others once sqlite3 commits, however loaded the machine.
		if (rng.below(4) == 0) {
			usleep((useconds_t)rng.below(20000));
		} else {
			for (int w = 0; w < 500 && last_ok(test::read_file(out)) == 0;
			     w++)
				usleep(10000);
			usleep((useconds_t)rng.below(30000));
		}
		kill(pid, SIGKILL);
		int st = fct::wait_status(pid);
		INFO("kill " << it << ": " << test::read_file(e.tmp / "sqlite.err"));
		REQUIRE(WIFSIGNALED(st));
		int acked = last_ok(test::read_file(out));
		if (acked > 0)
			acked_total += acked - next + 1;
		else
			acked = next - 1;

		// Recovery: by the API, or by sqlite3 itself under the shim.
		if (it % 2 == 0) {
			rio_fc_cache *c = nullptr;
			struct rio_fc_opts o = {};
			o.flags = RIO_FC_CREATE; // killed before it made one
			o.pool_size = 4 << 20;
			REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(),
				&o, &c));
			REQUIRE(fct::stats(c).conflicts == 0);
			REQUIRE_OK(rio_fc_cache_close(c));
		} else {
			test::write_file(e.tmp / "noop.sql", "SELECT 1;\n");
			int rs = run_sqlite(e, db, e.tmp / "noop.sql", e.tmp / "noop",
				true);
			REQUIRE(WIFEXITED(rs));
			REQUIRE(WEXITSTATUS(rs) == 0);
			replayed_by_sqlite++;
		}
		// The disk as a plain sqlite3 sees it.
		int cs = run_sqlite(e, db, check, e.tmp / "result", false);
		std::string res = test::read_file(e.tmp / "result");
		INFO("acknowledged " << acked << ", check: " << res);
		REQUIRE(WIFEXITED(cs));
		REQUIRE(WEXITSTATUS(cs) == 0);
		REQUIRE(res.rfind("ok\n", 0) == 0);
		int rows = 0, distinct = 0, max = 0, min = 0, bad = -1, prog = -1;
		REQUIRE(sscanf(strstr(res.c_str(), "rows|"),
				"rows|%d|%d|%d|%d", &rows, &distinct, &max,
				&min) == 4);
		REQUIRE(sscanf(strstr(res.c_str(), "bad|"), "bad|%d", &bad) == 1);
		if (strstr(res.c_str(), "progress|") != nullptr)
			REQUIRE(sscanf(strstr(res.c_str(), "progress|"),
					"progress|%d", &prog) == 1);
		else
			prog = 0; // killed before the first statement
		REQUIRE(bad == 0);                  // no partial transaction
		REQUIRE(rows == ROWS * max);
		REQUIRE(distinct == max);
		REQUIRE((max == 0 || min == 1));
		REQUIRE(prog == max);
		REQUIRE(max >= acked);              // every commit is there
		REQUIRE(max <= acked + 1);
		next = max + 1;
	}
	WARN("sqlite3: " << iterations << " kills, " << acked_total
			 << " transactions acknowledged, " << next - 1
			 << " on disk; " << replayed_by_sqlite
			 << " recoveries by sqlite3 under the shim");
	REQUIRE(next - 1 > iterations);
}
