/* tests/unit/test_log.c — daemon/log.h: its level names live beside
 * <syslog.h> (whose LOG_ERR … LOG_DEBUG are macros) in one translation
 * unit, with syslog's numbering, and log_parse_level reads the words and
 * digits the --log-level flag takes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <syslog.h>

#include "log.h"

static void test_levels_are_syslogs(void **state)
{
	(void)state;
	assert_int_equal(LOG_LEVEL_ERR, LOG_ERR);
	assert_int_equal(LOG_LEVEL_WARN, LOG_WARNING);
	assert_int_equal(LOG_LEVEL_NOTICE, LOG_NOTICE);
	assert_int_equal(LOG_LEVEL_INFO, LOG_INFO);
	assert_int_equal(LOG_LEVEL_DEBUG, LOG_DEBUG);
}

static void test_parse_level(void **state)
{
	(void)state;
	assert_int_equal(log_parse_level("error"), LOG_LEVEL_ERR);
	assert_int_equal(log_parse_level("warn"), LOG_LEVEL_WARN);
	assert_int_equal(log_parse_level("notice"), LOG_LEVEL_NOTICE);
	assert_int_equal(log_parse_level("info"), LOG_LEVEL_INFO);
	assert_int_equal(log_parse_level("debug"), LOG_LEVEL_DEBUG);
	assert_int_equal(log_parse_level("3"), LOG_LEVEL_ERR);
	assert_int_equal(log_parse_level("7"), LOG_LEVEL_DEBUG);
	assert_int_equal(log_parse_level("2"), -1);
	assert_int_equal(log_parse_level("8"), -1);
	assert_int_equal(log_parse_level("warning"), -1);
	assert_int_equal(log_parse_level(""), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_levels_are_syslogs),
		cmocka_unit_test(test_parse_level),
	};
	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
