// SPDX-License-Identifier: BSD-3-Clause
// report_test.cpp -- tpcbench's result rows and the thesis' averaging
// method (drop the best and the worst run, average the rest)
#include "../common/test_util.hpp"

extern "C" {
#include "tpcbench_int.h"
}

static tb_row row(const char *backend, const char *domain, int run, uint64_t tx)
{
	tb_row r = {};
	snprintf(r.workload, sizeof(r.workload), "debit-credit");
	snprintf(r.backend, sizeof(r.backend), "%s", backend);
	snprintf(r.label, sizeof(r.label), "%s (%s)", backend, domain);
	snprintf(r.domain, sizeof(r.domain), "%s", domain);
	r.threads = 1;
	r.run = run;
	r.db_bytes = 50 << 20;
	r.tx = tx;
	r.seconds = 1.0;
	return r;
}

static std::string summary_of(const std::vector<tb_row> &rows)
{
	char *buf = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	tb_summary(f, rows.data(), rows.size());
	fclose(f);
	std::string s(buf, len);
	free(buf);
	return s;
}

TEST_CASE("a row survives the CSV round trip", "[report]")
{
	tb_row r = row("vista", "cacheline", 3, 123456);
	r.has_fences = r.has_log = true;
	r.fences = 370368;
	r.bytes_logged = 9999;
	r.rss = 55 << 20;
	r.fence_ns = 151.5;
	snprintf(r.env, sizeof(r.env), "PMEM_IS_PMEM_FORCE=1");
	char *buf = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	tb_row_write(f, &r);
	fclose(f);
	tb_row p;
	REQUIRE(tb_row_parse(buf, &p) == 0);
	free(buf);
	REQUIRE(std::string(p.label) == "vista (cacheline)");
	REQUIRE(p.tx == 123456);
	REQUIRE(p.run == 3);
	REQUIRE(p.has_fences);
	REQUIRE(p.fences == 370368);
	REQUIRE(!p.has_syncs);
	REQUIRE(p.rss == (55u << 20));
	REQUIRE(p.fence_ns == Approx(151.5));
	REQUIRE(std::string(p.env) == "PMEM_IS_PMEM_FORCE=1");
	REQUIRE(tb_row_parse(tb_csv_header, &p) == -1);
	REQUIRE(tb_row_parse("too,few,fields", &p) == -1);
}

TEST_CASE("five runs: best and worst dropped, the middle three averaged",
	"[report]")
{
	std::vector<tb_row> rows;
	// none: 100, 200, 300, 400, 10000 tx/s -> mean of 200..400 = 300
	uint64_t none[] = {300, 10000, 100, 400, 200};
	for (int i = 0; i < 5; i++)
		rows.push_back(row("none", "-", i + 1, none[i]));
	// vista: 50, 60, 70, 80, 90 -> 70
	for (int i = 0; i < 5; i++)
		rows.push_back(row("vista", "byte", i + 1, 50 + 10 * (uint64_t)i));
	std::string s = summary_of(rows);
	INFO(s);
	// workload,label,backend,domain,group,threads,tx_size,tx_per_s,
	// ns_per_tx,overhead_ns,min,median,max,...
	REQUIRE(s.find("debit-credit,none (-),none,-,0,1,0,300.0,3333333.3,"
		       "0.0,100.0,300.0,10000.0,") != std::string::npos);
	// overhead = 1e9/70 - 1e9/300
	REQUIRE(s.find("debit-credit,vista (byte),vista,byte,0,1,0,70.0,"
		       "14285714.3,10952381.0,50.0,70.0,90.0,") !=
		std::string::npos);
}

TEST_CASE("fewer than three runs are all averaged", "[report]")
{
	std::vector<tb_row> rows = {row("none", "-", 1, 100),
		row("none", "-", 2, 300)};
	std::string s = summary_of(rows);
	INFO(s);
	REQUIRE(s.find(",200.0,5000000.0,0.0,100.0,200.0,300.0,") !=
		std::string::npos);
}
