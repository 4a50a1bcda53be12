// SPDX-License-Identifier: BSD-3-Clause
// err_test.cpp -- return codes, their names and texts, the shared message
#include "vista_test.hpp"

TEST_CASE("every VISTA code has a name and a text; others go to librio",
	"[err]")
{
	std::set<std::string> texts;
#define CHECK_CODE(name, value, msg)                                      \
	REQUIRE(std::string(vista_err_name(name)) == #name);              \
	REQUIRE(std::string(vista_strerror(name)) == msg);                \
	REQUIRE((value) <= -31000);                                       \
	REQUIRE((value) > -32000);                                        \
	REQUIRE(texts.insert(msg).second);
	VISTA_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
	REQUIRE(texts.size() == 13);
	REQUIRE(std::string(vista_err_name(RIO_EBADCSUM)) == "RIO_EBADCSUM");
	REQUIRE(std::string(vista_strerror(RIO_EBADCSUM)) ==
		rio_strerror(RIO_EBADCSUM));
	REQUIRE(std::string(vista_err_name(-ENOENT)) == "ENOENT");
	REQUIRE(std::string(vista_strerror(0)) == "success");
	REQUIRE(std::string(vista_err_name(-31999)) == "UNKNOWN");
}

TEST_CASE("one thread-local message serves the whole stack", "[err]")
{
	REQUIRE(vista_errormsg() == rio_errormsg());
	vt::Env e;
	vista *v = e.open();
	VREQUIRE_RC(vista_end_transaction(v), VISTA_ENOTX);
	REQUIRE(std::string(vista_errormsg()).find("vista_end_transaction") !=
		std::string::npos);
	std::thread([] {
		REQUIRE(std::string(vista_errormsg()).empty());
	}).join();
	VREQUIRE_OK(vista_fini(v));
}
